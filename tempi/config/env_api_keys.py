"""Which environment variables hold a provider's key, as pi 0.73.1's env-api-keys.js reads them.

The first set variable of a provider wins (Anthropic: ANTHROPIC_OAUTH_TOKEN before
ANTHROPIC_API_KEY; GitHub Copilot: COPILOT_GITHUB_TOKEN, GH_TOKEN, GITHUB_TOKEN). Amazon
Bedrock and Vertex AI's application default credentials have no key: when their credentials
are configured the "key" is the marker AUTHENTICATED, and the provider reads the real cloud
credentials from the environment itself, on the worker, at call time.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from tempi.config.secret_files import secret_value

AUTHENTICATED = "<authenticated>"

ENV_KEY_VARIABLES: dict[str, tuple[str, ...]] = {
    "github-copilot": ("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"),
    "anthropic": ("ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_API_KEY"),
    "openai": ("OPENAI_API_KEY",),
    "azure-openai-responses": ("AZURE_OPENAI_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "google": ("GEMINI_API_KEY",),
    "google-vertex": ("GOOGLE_CLOUD_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "vercel-ai-gateway": ("AI_GATEWAY_API_KEY",),
    "zai": ("ZAI_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "minimax": ("MINIMAX_API_KEY",),
    "minimax-cn": ("MINIMAX_CN_API_KEY",),
    "moonshotai": ("MOONSHOT_API_KEY",),
    "moonshotai-cn": ("MOONSHOT_API_KEY",),
    "huggingface": ("HF_TOKEN",),
    "fireworks": ("FIREWORKS_API_KEY",),
    "opencode": ("OPENCODE_API_KEY",),
    "opencode-go": ("OPENCODE_API_KEY",),
    "kimi-coding": ("KIMI_API_KEY",),
    "cloudflare-workers-ai": ("CLOUDFLARE_API_KEY",),
    "cloudflare-ai-gateway": ("CLOUDFLARE_API_KEY",),
    "xiaomi": ("XIAOMI_API_KEY",),
    "xiaomi-token-plan-cn": ("XIAOMI_TOKEN_PLAN_CN_API_KEY",),
    "xiaomi-token-plan-ams": ("XIAOMI_TOKEN_PLAN_AMS_API_KEY",),
    "xiaomi-token-plan-sgp": ("XIAOMI_TOKEN_PLAN_SGP_API_KEY",),
}

# Any one of these (both keys together) means Bedrock can get credentials from the AWS chain.
_BEDROCK_SIGNS: tuple[tuple[str, ...], ...] = (
    ("AWS_PROFILE",),
    ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"),
    ("AWS_BEARER_TOKEN_BEDROCK",),
    ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",),
    ("AWS_CONTAINER_CREDENTIALS_FULL_URI",),
    ("AWS_WEB_IDENTITY_TOKEN_FILE",),
)


def find_env_keys(provider: str, env: Mapping[str, str] | None = None) -> list[str]:
    """The provider's key variables that are set, in pi's order."""
    return [name for name in ENV_KEY_VARIABLES.get(provider, ()) if secret_value(name, env)]


def _vertex_adc_configured(environment: Mapping[str, str]) -> bool:
    credentials = environment.get("GOOGLE_APPLICATION_CREDENTIALS")
    if credentials:
        found = Path(credentials).exists()
    else:
        home = environment.get("HOME") or str(Path.home())
        found = (Path(home) / ".config" / "gcloud" / "application_default_credentials.json").exists()
    project = environment.get("GOOGLE_CLOUD_PROJECT") or environment.get("GCLOUD_PROJECT")
    return found and bool(project) and bool(environment.get("GOOGLE_CLOUD_LOCATION"))


def env_api_key(provider: str, env: Mapping[str, str] | None = None) -> str | None:
    """The key the environment gives `provider`, AUTHENTICATED for configured Bedrock or
    Vertex ADC credentials, else None."""
    environment = os.environ if env is None else env
    for name in ENV_KEY_VARIABLES.get(provider, ()):
        if value := secret_value(name, env):
            return value
    if provider == "google-vertex" and _vertex_adc_configured(environment):
        return AUTHENTICATED
    if provider == "amazon-bedrock" and any(
        all(environment.get(name) for name in sign) for sign in _BEDROCK_SIGNS
    ):
        return AUTHENTICATED
    return None

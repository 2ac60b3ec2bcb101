"""pi's package commands, which tempi does not have: a user with pi's habits who types
`tempi list` or `tempi update` means the command, not a prompt for the model, so each gets
an answer saying what tempi offers instead."""

from __future__ import annotations

from tempi.config.paths import tempi_home

PI_ONLY_COMMANDS = ("list", "config", "install", "remove", "update")


def pi_command_answer(name: str) -> str:
    home = tempi_home()
    as_prompt = f"To send {name!r} to the model as a prompt: tempi -p {name}"
    answers = {
        "list": "tempi installs no packages, so there are none to list. "
        "Sessions: tempi sessions list; models: tempi --list-models.",
        "config": f"tempi has no settings screen: edit {home}/settings.json (or .tempi/settings.json "
        f"in a project) and {home}/models.json (pi's models.json works unchanged).",
        "install": "tempi does not install pi packages. Skills go in "
        f"{home}/skills/NAME/SKILL.md (or .tempi/skills/ in a project), prompt templates in "
        f"{home}/prompts/, subagents in {home}/agents/.",
        "remove": "tempi does not install pi packages, so there are none to remove. Skills, prompt "
        f"templates and subagents are files under {home}/ (or .tempi/ in a project): delete them there.",
        "update": "tempi does not update itself: update it the way you installed it "
        "(e.g. uv tool upgrade tempi, or git pull && uv sync in a checkout).",
    }
    return f"`tempi {name}` is a pi command that tempi does not have. {answers[name]} {as_prompt}"

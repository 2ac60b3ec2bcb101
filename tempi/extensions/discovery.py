"""Which extensions a session uses: every `*.py` module and package directory in tempi's
home `extensions/` and the project's `.tempi/extensions/`, then the `--extension` paths,
each once, as absolute paths."""

from __future__ import annotations

from pathlib import Path

from tempi.config.paths import PROJECT_CONFIG_DIR, tempi_home
from tempi.config.project_trust import project_trusted

EXTENSIONS_DIR = "extensions"


def home_extensions_dir() -> Path:
    return tempi_home() / EXTENSIONS_DIR


def project_extensions_dir(cwd: Path) -> Path:
    return cwd / PROJECT_CONFIG_DIR / EXTENSIONS_DIR


def _in_dir(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    found = []
    for entry in sorted(directory.iterdir()):
        if entry.name.startswith((".", "_")):
            continue
        if (entry.is_file() and entry.suffix == ".py") or (entry / "__init__.py").is_file():
            found.append(entry)
    return found


def discover_extensions(cwd: Path, explicit: list[str], *, discover: bool = True) -> list[str]:
    """Absolute paths; an explicit path is taken from `cwd` and kept even when it does not
    exist, so loading it says so. The project's own extensions count only while the owner
    trusts the project."""
    paths: list[Path] = []
    if discover:
        project = _in_dir(project_extensions_dir(cwd))
        paths = [*_in_dir(home_extensions_dir()), *(project if project and project_trusted(cwd) else [])]
    paths += [(cwd / Path(p).expanduser()) for p in explicit]
    unique: list[str] = []
    for path in paths:
        text = str(path.resolve())
        if text not in unique:
            unique.append(text)
    return unique


def untrusted_project_extensions(cwd: Path) -> list[Path]:
    """The project's extensions left out because the owner has not trusted the project."""
    found = _in_dir(project_extensions_dir(cwd))
    return found if found and not project_trusted(cwd) else []


def project_config_root(path: Path) -> Path | None:
    """The project whose `.tempi/` holds `path`, or None (tempi's home is not a project)."""
    home = tempi_home().resolve()
    for folder in path.parents:
        if folder.name == PROJECT_CONFIG_DIR and folder.resolve() != home:
            return folder.parent
    return None

"""Loading an extension module and running its factory. Each process keeps what it loaded,
keyed by path and modification time, so a worker loads a module once and again only after
it changed."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import traceback
from hashlib import sha256
from pathlib import Path
from types import CodeType

from tempi.config.project_trust import project_trusted
from tempi.extensions.api import ExtensionAPI
from tempi.extensions.discovery import project_config_root
from tempi.extensions.models import ExtensionProblem

FACTORY = "extension"
_TEMPI_DIR = str(Path(__file__).resolve().parent.parent) + os.sep

_loaded: dict[str, tuple[int, ExtensionAPI]] = {}


class ExtensionLoadError(Exception):
    pass


def _module_file(path: Path) -> Path:
    if path.is_dir():
        init = path / "__init__.py"
        if not init.is_file():
            raise ExtensionLoadError(f"extension {path} is a directory without __init__.py")
        return init
    if not path.is_file():
        raise ExtensionLoadError(f"extension {path} does not exist on this machine")
    return path


def describe_failure(err: BaseException) -> str:
    """The error and the extension's own line that raised it, not tempi's frames."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if not f.filename.startswith(_TEMPI_DIR)]
    last = frames[-1] if frames else None
    at = f" (at {last.filename}:{last.lineno})" if last else ""
    return f"{type(err).__name__}: {err}{at}"


class _FreshSourceLoader(importlib.machinery.SourceFileLoader):
    """Compiles the file as it is now. Python's bytecode cache tells files apart by their
    mtime in whole seconds and their size, so an edit within the same second that keeps the
    size would load the old code."""

    def get_code(self, fullname: str) -> CodeType:
        path = self.get_filename(fullname)
        return compile(self.get_data(path), path, "exec", dont_inherit=True)


def load_extension(path_text: str) -> ExtensionAPI:
    """The extension at `path_text`, its factory run; raises ExtensionLoadError saying why not."""
    path = Path(path_text)
    module_file = _module_file(path)
    try:
        mtime = module_file.stat().st_mtime_ns
    except OSError as err:
        raise ExtensionLoadError(f"extension {path} cannot be read: {err.strerror}") from None
    cached = _loaded.get(path_text)
    if cached is not None and cached[0] == mtime:
        return cached[1]
    _check_trusted(path)
    name = f"tempi_extension_{sha256(f'{path_text}:{mtime}'.encode()).hexdigest()[:16]}"
    spec = importlib.util.spec_from_file_location(
        name,
        module_file,
        loader=_FreshSourceLoader(name, str(module_file)),
        submodule_search_locations=[str(path)] if path.is_dir() else None,
    )
    if spec is None or spec.loader is None:
        raise ExtensionLoadError(f"extension {path} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        sys.modules.pop(name, None)
        raise ExtensionLoadError(f"extension {path} failed to import: {describe_failure(err)}") from None
    factory = getattr(module, FACTORY, None)
    if not callable(factory):
        raise ExtensionLoadError(f"extension {path} has no `def {FACTORY}(tempi): ...` function")
    api = ExtensionAPI(path=path_text)
    try:
        factory(api)
    except Exception as err:
        raise ExtensionLoadError(
            f"extension {path}: its {FACTORY}() raised {describe_failure(err)}"
        ) from None
    _loaded[path_text] = (mtime, api)
    return api


def _check_trusted(path: Path) -> None:
    """A repository's own extension runs only as its owner trusted it: checked each time its
    code is loaded, so a file the model rewrote is refused, never run on the host."""
    root = project_config_root(path.resolve())
    if root is not None and not project_trusted(root):
        raise ExtensionLoadError(
            f"extension {path} belongs to the repository at {root}, which is not trusted as its "
            f".tempi/ is now (never trusted, or changed since); run `tempi --trust` there after "
            "checking what it runs"
        )


def load_all(paths: list[str]) -> tuple[list[ExtensionAPI], list[ExtensionProblem]]:
    """The extensions that load, in order, and the problems of those that do not."""
    loaded: list[ExtensionAPI] = []
    problems: list[ExtensionProblem] = []
    for path in paths:
        try:
            loaded.append(load_extension(path))
        except ExtensionLoadError as err:
            problems.append(ExtensionProblem(extension=path, error=str(err)))
    return loaded, problems


def check_extensions(paths: list[str]) -> list[ExtensionProblem]:
    """Load the extensions here as a worker would, for the problems to show at once."""
    return load_all(paths)[1]

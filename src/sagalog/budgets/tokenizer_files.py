"""tiktoken's encoding files, installed from a package registry so estimates work offline.

tiktoken holds no encoding in its wheel: it downloads each one from
``openaipublic.blob.core.windows.net`` the first time it is loaded, and keeps it in
``TIKTOKEN_CACHE_DIR`` under the sha1 of its URL. Where only the package registries
are reachable (CI, locked-down deployments, this project's own workplace) that
download fails, or hangs, at the first model call: the worst place to find out.

The ``litellm`` wheel on PyPI carries those cache files, under the same names. So
``provision`` downloads the pinned wheel with pip (never installing or importing
it), copies out the files of ``ENCODINGS``, and checks each against the sha256 that
tiktoken itself checks before it uses a cached file (``FILES``, held to tiktoken's
own source by a unit test).

``check_installed`` is the guard the estimator runs before tiktoken loads an
encoding: a missing or damaged file is a ``ConfigurationError`` saying what to run,
never a download attempt.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from sagalog.errors import ConfigurationError, SagalogError

#: The encodings installed: every OpenAI chat model since gpt-3.5-turbo uses
#: cl100k_base or o200k_base (gpt-oss's o200k_harmony reads o200k_base's file);
#: p50k_base comes in the same wheel. r50k_base and gpt2 (retired models) do not.
ENCODINGS = ("cl100k_base", "o200k_base", "p50k_base")

#: The wheel the files come from: the newest litellm published as a pure-Python
#: wheel, so every platform downloads the same bytes (later releases ship one wheel
#: per platform, three times the size). Its code is never installed or run.
LITELLM = "litellm==1.91.5"
_WHEEL_FOLDER = "litellm/litellm_core_utils/tokenizers"

#: tiktoken's own setting: the folder it reads cached files from.
TIKTOKEN_CACHE_DIR = "TIKTOKEN_CACHE_DIR"
#: What fixes a missing or damaged file; every error here ends with it.
PROVISION_COMMAND = "python -m sagalog.budgets.tokenizer_files"


class TokenizerFileSettings(BaseSettings):
    """Where sagalog keeps tiktoken's files when ``TIKTOKEN_CACHE_DIR`` is not set."""

    model_config = SettingsConfigDict(env_prefix="SAGALOG_", extra="ignore")

    tiktoken_cache_dir: Path = Field(
        default_factory=lambda: Path.home() / ".cache" / "sagalog" / "tiktoken",
        description="tiktoken's encoding files (SAGALOG_TIKTOKEN_CACHE_DIR); safe to delete, "
        f"`{PROVISION_COMMAND}` installs them again.",
    )


@dataclass(frozen=True)
class TokenizerFile:
    """One file an encoding loads: where tiktoken would fetch it, and its sha256."""

    url: str
    sha256: str

    @property
    def cache_name(self) -> str:
        """The file's name in the cache: tiktoken names it by the sha1 of its URL
        (``tiktoken.load.read_file_cached``)."""
        return hashlib.sha1(self.url.encode()).hexdigest()

    @property
    def label(self) -> str:
        """The name a person recognises (``o200k_base.tiktoken``)."""
        return self.url.rsplit("/", 1)[-1]


class Action(Enum):
    KEPT = "already present"
    INSTALLED = "installed"
    REPLACED = "replaced a damaged copy"


@dataclass(frozen=True)
class Provisioned:
    file: TokenizerFile
    path: Path
    action: Action

    def __str__(self) -> str:
        return f"{self.file.label}: {self.action.value} at {self.path} (sha256 {self.file.sha256})"


# -- which files -----------------------------------------------------------------------

_BLOBS = "https://openaipublic.blob.core.windows.net/encodings"

#: Per encoding, the file it loads, as ``tiktoken_ext.openai_public`` names it (a unit
#: test holds this table to tiktoken's source, so an upgrade that changes a file fails
#: there, by name). o200k_harmony and p50k_edit load their base's file.
FILES: dict[str, TokenizerFile] = {
    "cl100k_base": TokenizerFile(
        f"{_BLOBS}/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": TokenizerFile(
        f"{_BLOBS}/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "p50k_base": TokenizerFile(
        f"{_BLOBS}/p50k_base.tiktoken",
        "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
    ),
}
_SAME_FILE_AS = {"o200k_harmony": "o200k_base", "p50k_edit": "p50k_base"}


def files_for(encoding: str) -> tuple[TokenizerFile, ...]:
    """The installed files loading ``encoding`` reads.

    Raises:
        ConfigurationError: the encoding reads a file sagalog does not install.
    """
    file = FILES.get(_SAME_FILE_AS.get(encoding, encoding))
    if file is None:
        raise ConfigurationError(
            f"tiktoken encoding {encoding}: its files are not among those sagalog installs "
            f"for offline use ({', '.join(ENCODINGS)}); estimate with a model that uses one of "
            "those"
        )
    return (file,)


def provisioned_files() -> tuple[TokenizerFile, ...]:
    """The files of ``ENCODINGS``, with tiktoken's expected hashes."""
    return tuple(FILES[encoding] for encoding in ENCODINGS)


# -- where -----------------------------------------------------------------------------


def cache_dir() -> Path:
    """The folder tiktoken reads: ``TIKTOKEN_CACHE_DIR`` when set (it is tiktoken's
    own setting, so installing anywhere else would not help), else
    ``SAGALOG_TIKTOKEN_CACHE_DIR``, else ``~/.cache/sagalog/tiktoken``.

    Raises:
        ConfigurationError: ``TIKTOKEN_CACHE_DIR`` is set but empty.
    """
    given = os.environ.get(TIKTOKEN_CACHE_DIR)
    if given == "":
        raise ConfigurationError(
            f"{TIKTOKEN_CACHE_DIR} is set but empty, which turns tiktoken's cache off and makes "
            f"it download every encoding; unset it (sagalog then uses "
            f"{TokenizerFileSettings().tiktoken_cache_dir}) or point it at a folder, then run "
            f"`{PROVISION_COMMAND}`"
        )
    if given:
        return Path(given).expanduser()
    return TokenizerFileSettings().tiktoken_cache_dir.expanduser()


def use_cache() -> Path:
    """Point tiktoken at ``cache_dir()`` unless ``TIKTOKEN_CACHE_DIR`` says otherwise.

    tiktoken reads the variable when it loads an encoding, so this must run first;
    without it tiktoken would look in a temporary folder and then go to the network.
    """
    directory = cache_dir()
    os.environ.setdefault(TIKTOKEN_CACHE_DIR, str(directory))
    return directory


def check_installed(encoding: str) -> None:
    """Refuse to let tiktoken load ``encoding`` unless its files are in the cache, whole.

    tiktoken would otherwise delete a damaged file and download the encoding, which
    cannot work where only package registries are reachable.

    Raises:
        ConfigurationError: a file is missing or damaged, or not one sagalog installs.
    """
    directory = use_cache()
    for file in files_for(encoding):
        path = directory / file.cache_name
        found = _sha256_of(path)
        if found == file.sha256:
            continue
        state = "missing" if found is None else f"damaged (sha256 {found})"
        raise ConfigurationError(
            f"tiktoken encoding {encoding}: {file.label} is {state} at {path}, where tiktoken "
            f"expects sha256 {file.sha256}; run `{PROVISION_COMMAND}` (or `make install`) to "
            "install it"
        )


# -- installing ------------------------------------------------------------------------


def provision(
    directory: Path | None = None,
    *,
    files: Sequence[TokenizerFile] | None = None,
    download: Callable[[Path], Path] | None = None,
) -> list[Provisioned]:
    """Make ``directory`` (default ``cache_dir()``) hold every file, whole.

    Idempotent: files already present with the right hash are kept, and the wheel is
    downloaded only when one is missing or damaged. A damaged file is replaced; no
    file is written before its hash is checked, and each is written under a
    temporary name and renamed, so a crash leaves no half-written file behind.

    Args:
        files: what to install; ``provisioned_files()`` unless a test says otherwise.
        download: fetches the wheel into the given folder and returns its path;
            ``download_wheel`` unless a test says otherwise.

    Raises:
        ConfigurationError: the folder cannot be written, the wheel cannot be
            downloaded, or it lacks a file or holds one with another hash.
    """
    directory = cache_dir() if directory is None else directory
    files = provisioned_files() if files is None else files
    fetch = download_wheel if download is None else download
    done: list[Provisioned] = []
    wanted: list[tuple[TokenizerFile, Action]] = []
    for file in files:
        found = _sha256_of(directory / file.cache_name)
        if found == file.sha256:
            done.append(Provisioned(file, directory / file.cache_name, Action.KEPT))
        else:
            wanted.append((file, Action.INSTALLED if found is None else Action.REPLACED))
    if not wanted:
        return done
    _make_dir(directory)
    with tempfile.TemporaryDirectory(prefix="sagalog-tiktoken-") as scratch:
        wheel = fetch(Path(scratch))
        contents = _read_from_wheel(wheel, [file for file, _ in wanted])
        for file, action in wanted:
            path = directory / file.cache_name
            _write_whole(path, contents[file])
            done.append(Provisioned(file, path, action))
    order = {file: index for index, file in enumerate(files)}
    return sorted(done, key=lambda provisioned: order[provisioned.file])


def download_wheel(into: Path) -> Path:
    """Download the ``LITELLM`` wheel into ``into`` with this interpreter's pip.

    Only a wheel (``--only-binary``: pip never runs a source distribution's build to
    get here) and without its dependencies: nothing of it is installed or imported.

    Raises:
        ConfigurationError: pip failed, or left no single litellm wheel.
    """
    pip = ["download", LITELLM, "--no-deps", "--only-binary=:all:", "--quiet", "--dest", str(into)]
    command = [sys.executable, "-m", "pip", *pip]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise ConfigurationError(
            f"could not download {LITELLM}, which carries tiktoken's encoding files: "
            f"`pip {' '.join(pip)}` exited {done.returncode} ({' / '.join(said)}); check "
            f"that this machine reaches the package index pip uses, then run "
            f"`{PROVISION_COMMAND}`"
        )
    wheels = sorted(into.glob("litellm-*.whl"))
    if len(wheels) != 1:
        raise ConfigurationError(
            f"`pip download {LITELLM}` left {len(wheels)} litellm wheels in {into}, not one; "
            f"run `{PROVISION_COMMAND}` again"
        )
    return wheels[0]


def _read_from_wheel(wheel: Path, files: Sequence[TokenizerFile]) -> dict[TokenizerFile, bytes]:
    contents: dict[TokenizerFile, bytes] = {}
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = set(archive.namelist())
            for file in files:
                member = f"{_WHEEL_FOLDER}/{file.cache_name}"
                if member not in members:
                    raise ConfigurationError(
                        f"{wheel.name} has no {member} ({file.label}); pin a litellm whose "
                        f"wheel carries it in {__name__}.LITELLM, then run `{PROVISION_COMMAND}`"
                    )
                data = archive.read(member)
                found = hashlib.sha256(data).hexdigest()
                if found != file.sha256:
                    raise ConfigurationError(
                        f"{wheel.name}: {member} ({file.label}) has sha256 {found}, but tiktoken "
                        f"expects {file.sha256}; nothing was installed. Pin a litellm whose "
                        f"wheel matches the installed tiktoken in {__name__}.LITELLM, then run "
                        f"`{PROVISION_COMMAND}`"
                    )
                contents[file] = data
    except (OSError, zipfile.BadZipFile) as error:
        raise ConfigurationError(
            f"{wheel}: not a readable wheel ({error}); run `{PROVISION_COMMAND}` again"
        ) from error
    return contents


def _sha256_of(path: Path) -> str | None:
    """The file's sha256, or None when there is no file to read."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        raise ConfigurationError(
            f"{path}: cannot be read ({error}); fix its permissions or remove it, then run "
            f"`{PROVISION_COMMAND}`"
        ) from error


def _make_dir(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigurationError(
            f"{directory}: cannot hold tiktoken's files ({error}); set "
            f"SAGALOG_TIKTOKEN_CACHE_DIR to a writable folder and run `{PROVISION_COMMAND}`"
        ) from error


def _write_whole(path: Path, data: bytes) -> None:
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        partial.write_bytes(data)
        partial.replace(path)
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise ConfigurationError(
            f"{path}: cannot be written ({error}); set SAGALOG_TIKTOKEN_CACHE_DIR to a writable "
            f"folder and run `{PROVISION_COMMAND}`"
        ) from error


def main() -> int:
    """Install the files and say, per file, what was done (``make install`` runs it)."""
    try:
        done = provision()
    except SagalogError as error:
        print(f"error: {error}", file=sys.stderr)
        return int(error.exit_code)
    for provisioned in done:
        print(provisioned)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

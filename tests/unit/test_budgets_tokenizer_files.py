"""tiktoken's files for offline use (``sagalog.budgets.tokenizer_files``).

The wheel download is stubbed: a fake wheel built here, holding files whose hashes
the test chooses, so nothing reaches the network.
"""

from __future__ import annotations

import hashlib
import os
import re
import zipfile
from pathlib import Path

import pytest

from sagalog.budgets import tokenizer_files
from sagalog.budgets.tokenizer_files import (
    FILES,
    LITELLM,
    PROVISION_COMMAND,
    Action,
    TokenizerFile,
    cache_dir,
    check_installed,
    files_for,
    provision,
    provisioned_files,
    use_cache,
)
from sagalog.errors import ConfigurationError


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


ALPHA = TokenizerFile(url="https://example.invalid/alpha.tiktoken", sha256=sha256(b"alpha"))
BETA = TokenizerFile(url="https://example.invalid/beta.tiktoken", sha256=sha256(b"beta"))
CONTENTS = {ALPHA: b"alpha", BETA: b"beta"}


class FakeWheel:
    """Stands in for ``download_wheel``: writes a wheel holding ``members``, counts calls."""

    def __init__(self, members: dict[str, bytes]) -> None:
        self.members = members
        self.calls = 0

    def __call__(self, into: Path) -> Path:
        self.calls += 1
        wheel = into / "litellm-0.0.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            for name, data in self.members.items():
                archive.writestr(name, data)
        return wheel


def in_wheel(file: TokenizerFile) -> str:
    return f"litellm/litellm_core_utils/tokenizers/{file.cache_name}"


def wheel_of(contents: dict[TokenizerFile, bytes]) -> FakeWheel:
    return FakeWheel({in_wheel(file): data for file, data in contents.items()})


def never(into: Path) -> Path:
    raise AssertionError("downloaded although every file was present")


def test_the_files_are_tiktokens_own_names_and_hashes() -> None:
    """What tiktoken 0.14.0 expects, checked by hand against the litellm wheel: the name
    is the sha1 of the URL, the hash the sha256 tiktoken checks."""
    found = {file.label: (file.cache_name, file.sha256) for file in provisioned_files()}
    assert found == {
        "cl100k_base.tiktoken": (
            "9b5ad71b2ce5302211f9c61530b329a4922fc6a4",
            "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        ),
        "o200k_base.tiktoken": (
            "fb374d419588a4632f3f557e76b4b70aebbca790",
            "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        ),
        "p50k_base.tiktoken": (
            "ec7223a39ce59f226a68acc30dc1af2788490e15",
            "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
        ),
    }


def test_the_table_is_what_tiktokens_own_source_loads() -> None:
    """Each installed file's URL and hash appear, together, in the constructor tiktoken
    runs for that encoding: an upgrade that changes a file fails here, by name."""
    import inspect

    import tiktoken_ext.openai_public as source

    for encoding, file in FILES.items():
        constructor = inspect.getsource(source.ENCODING_CONSTRUCTORS[encoding])
        assert file.url in constructor, encoding
        assert file.sha256 in constructor, encoding


def test_an_encoding_built_on_another_reads_that_ones_file() -> None:
    assert files_for("o200k_harmony") == files_for("o200k_base")
    assert files_for("p50k_edit") == files_for("p50k_base")


@pytest.mark.parametrize("encoding", ["r50k_base", "gpt2", "no_such_encoding"])
def test_an_encoding_whose_files_are_not_installed_is_refused(encoding: str) -> None:
    with pytest.raises(ConfigurationError, match=f"tiktoken encoding {encoding}: its files"):
        files_for(encoding)


def test_an_empty_cache_gets_every_file_from_one_download(tmp_path: Path) -> None:
    wheel = wheel_of(CONTENTS)
    done = provision(tmp_path / "cache", files=[ALPHA, BETA], download=wheel)
    assert wheel.calls == 1
    assert [(p.file, p.action) for p in done] == [
        (ALPHA, Action.INSTALLED),
        (BETA, Action.INSTALLED),
    ]
    assert (tmp_path / "cache" / ALPHA.cache_name).read_bytes() == b"alpha"
    assert (tmp_path / "cache" / BETA.cache_name).read_bytes() == b"beta"
    assert sorted(path.name for path in (tmp_path / "cache").iterdir()) == sorted(
        [ALPHA.cache_name, BETA.cache_name]
    )


def test_present_valid_files_are_not_downloaded_again(tmp_path: Path) -> None:
    provision(tmp_path, files=[ALPHA, BETA], download=wheel_of(CONTENTS))
    again = provision(tmp_path, files=[ALPHA, BETA], download=never)
    assert [p.action for p in again] == [Action.KEPT, Action.KEPT]


def test_a_damaged_file_is_replaced_and_a_whole_one_kept(tmp_path: Path) -> None:
    (tmp_path / ALPHA.cache_name).write_bytes(b"alpha")
    (tmp_path / BETA.cache_name).write_bytes(b"be")  # cut short
    wheel = wheel_of(CONTENTS)
    done = provision(tmp_path, files=[ALPHA, BETA], download=wheel)
    assert wheel.calls == 1
    assert {p.file: p.action for p in done} == {ALPHA: Action.KEPT, BETA: Action.REPLACED}
    assert (tmp_path / BETA.cache_name).read_bytes() == b"beta"


def test_a_wheel_with_another_file_installs_nothing(tmp_path: Path) -> None:
    (tmp_path / BETA.cache_name).write_bytes(b"be")
    wheel = wheel_of({ALPHA: b"alpha", BETA: b"not beta"})
    with pytest.raises(ConfigurationError) as refused:
        provision(tmp_path, files=[ALPHA, BETA], download=wheel)
    message = str(refused.value)
    assert in_wheel(BETA) in message
    assert f"tiktoken expects {BETA.sha256}; nothing was installed" in message
    assert PROVISION_COMMAND in message
    assert not (tmp_path / ALPHA.cache_name).exists()
    assert (tmp_path / BETA.cache_name).read_bytes() == b"be"


def test_a_wheel_without_a_file_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigurationError, match=re.escape(f"has no {in_wheel(BETA)} (beta.tiktoken)")
    ):
        provision(tmp_path, files=[ALPHA, BETA], download=wheel_of({ALPHA: b"alpha"}))
    assert list(tmp_path.iterdir()) == []


def test_a_cache_folder_that_cannot_be_made_is_refused_by_name(tmp_path: Path) -> None:
    blocker = tmp_path / "taken"
    blocker.write_text("a file, not a folder")
    with pytest.raises(ConfigurationError, match=re.escape(f"{blocker / 'cache'}: cannot hold")):
        provision(blocker / "cache", files=[ALPHA], download=wheel_of(CONTENTS))


def test_the_check_refuses_a_missing_or_damaged_file_and_says_what_to_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    (file,) = files_for("p50k_base")
    with pytest.raises(ConfigurationError, match=r"p50k_base\.tiktoken is missing") as missing:
        check_installed("p50k_base")
    assert PROVISION_COMMAND in str(missing.value)
    (tmp_path / file.cache_name).write_bytes(b"damaged")
    with pytest.raises(
        ConfigurationError, match=re.escape(f"damaged (sha256 {sha256(b'damaged')})")
    ):
        check_installed("p50k_base")


def test_tiktokens_own_setting_decides_the_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("SAGALOG_TIKTOKEN_CACHE_DIR", raising=False)
    assert cache_dir() == tmp_path / "home" / ".cache" / "sagalog" / "tiktoken"
    monkeypatch.setenv("SAGALOG_TIKTOKEN_CACHE_DIR", str(tmp_path / "ours"))
    assert cache_dir() == tmp_path / "ours"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "theirs"))
    assert cache_dir() == tmp_path / "theirs"


def test_an_empty_tiktoken_setting_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    with pytest.raises(ConfigurationError, match="turns tiktoken's cache off"):
        cache_dir()


def test_use_cache_points_tiktoken_at_the_folder_unless_already_pointed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.setenv("SAGALOG_TIKTOKEN_CACHE_DIR", str(tmp_path / "ours"))
    assert use_cache() == tmp_path / "ours"
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(tmp_path / "ours")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "theirs"))
    assert use_cache() == tmp_path / "theirs"
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(tmp_path / "theirs")


def test_the_command_reports_a_failure_with_its_exit_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def unreachable(*_: object, **__: object) -> list[object]:
        raise ConfigurationError(f"could not download {LITELLM}")

    monkeypatch.setattr(tokenizer_files, "provision", unreachable)
    assert tokenizer_files.main() == ConfigurationError.exit_code
    assert f"error: could not download {LITELLM}" in capsys.readouterr().err

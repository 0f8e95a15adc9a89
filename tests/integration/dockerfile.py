"""A Dockerfile read and played without Docker: the same files, install and command.

There is no Docker engine here, yet an image whose entry point cannot start is the
first thing a user would hit. ``Image.parse`` reads the instructions our Dockerfiles
use (ARG, ENV, WORKDIR, COPY, RUN, CMD, HEALTHCHECK) with the build arguments the
image is built with, expanding ``$NAME`` and ``${NAME}`` where Docker does (ENV,
WORKDIR, COPY); ``Image.lay_out`` copies what the COPY lines copy into a folder
standing for the image's root; ``Image.cmd`` is the CMD and ``Image.environment`` the
ENV with the image's absolute paths moved under that root. ``RUN pip install .`` is
the one install our images make: the test plays it by installing the wheel built from
the same tree into a fresh venv.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

INSTALL = "pip install ."

_VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


@dataclass
class Image:
    """What one Dockerfile does, as data."""

    path: Path
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    copies: list[tuple[list[str], str, str]] = field(default_factory=list)
    """(sources relative to the build context, destination, the WORKDIR then)."""
    runs: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    healthcheck: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, path: Path, build_args: Mapping[str, str] | None = None) -> Image:
        """The image ``path`` builds with ``build_args`` (``docker build --build-arg``).

        Stricter than Docker, which only warns: a build argument no ARG declares, or an
        ARG left without a value, is refused, as either builds another image than the
        one the caller meant.

        Raises:
            ValueError: naming the file and the argument.
        """
        given = dict(build_args or {})
        image = cls(path)
        variables: dict[str, str] = {}  # the ARGs and ENVs so far, for later instructions
        for instruction, argument in _instructions(path.read_text()):
            if instruction == "ARG":
                name, has_default, default = argument.partition("=")
                if name not in given and not has_default:
                    raise ValueError(f"{path}: ARG {name} has no default; pass it as a build arg")
                variables[name] = given.pop(name, _expand(default, variables))
            elif instruction == "ENV":
                # every pair expands with the values from before the instruction, as in Docker
                pairs = (pair.partition("=") for pair in shlex.split(argument))
                values = {key: _expand(value, variables) for key, _, value in pairs}
                image.env.update(values)
                variables.update(values)
            elif instruction == "WORKDIR":
                image.workdir = _expand(argument, variables)
            elif instruction == "COPY":
                *sources, destination = _expand(argument, variables).split()
                image.copies.append((sources, destination, image.workdir))
            elif instruction == "RUN":
                image.runs.append(argument)
            elif instruction == "CMD":
                image.cmd = json.loads(argument)
            elif instruction == "HEALTHCHECK":
                command = argument.split(" CMD ", 1)[1]
                image.healthcheck = ["sh", "-c", command]
        if given:
            raise ValueError(f"{path}: no ARG declares the build args {sorted(given)}")
        return image

    @property
    def installs_the_project(self) -> bool:
        return any(INSTALL in run for run in self.runs)

    def lay_out(self, context: Path, root: Path) -> None:
        """Copy what the COPY lines copy, and make the folders ``mkdir -p`` makes."""
        for sources, destination, workdir in self.copies:
            where = destination if destination.startswith("/") else f"{workdir}/{destination}"
            target = self._inside(root, where)
            for source in sources:
                origin = context / source
                if origin.is_dir():  # a folder's contents go into the destination
                    shutil.copytree(origin, target, dirs_exist_ok=True)
                elif destination.endswith("/") or len(sources) > 1:
                    target.mkdir(parents=True, exist_ok=True)
                    shutil.copy(origin, target / origin.name)
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(origin, target)
        for run in self.runs:
            words = shlex.split(run.replace("&&", " ; "))
            for index, word in enumerate(words):
                if word == "-p" and index > 0 and words[index - 1] == "mkdir":
                    self._inside(root, words[index + 1]).mkdir(parents=True, exist_ok=True)

    def environment(self, root: Path) -> dict[str, str]:
        """The ENV, each absolute path moved under ``root``."""
        return {
            key: str(self._inside(root, value)) if value.startswith("/") else value
            for key, value in self.env.items()
        }

    def working_dir(self, root: Path) -> Path:
        return self._inside(root, self.workdir)

    @staticmethod
    def _inside(root: Path, path: str) -> Path:
        return root / path.lstrip("/")


def _expand(text: str, variables: Mapping[str, str]) -> str:
    """``$NAME`` and ``${NAME}`` replaced by their values; an unknown name by nothing."""
    return _VARIABLE.sub(lambda m: variables.get(m.group(1) or m.group(2), ""), text)


def _instructions(text: str) -> list[tuple[str, str]]:
    """``(INSTRUCTION, argument)`` pairs, continuation lines joined, comments dropped."""
    found = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        whole = pending + stripped
        pending = ""
        instruction, _, argument = whole.partition(" ")
        found.append((instruction.upper(), " ".join(argument.split())))
    return found

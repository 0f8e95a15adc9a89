"""``sagalog schemas check``: every schema is what its class generates, and satisfies the
rule against every committed earlier version."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.compatibility import Incompatibility, check
from sagalog.contracts.generated_files import FileProblem, file_problems
from sagalog.contracts.history import SchemaHistory
from sagalog.personal.fields import ATTRIBUTE, unmarked


@dataclass
class SchemaCheckReport:
    """What the check found; ``ok`` when there is nothing to fix."""

    checked: dict[str, int] = field(default_factory=dict)  # event type -> earlier versions
    incompatibilities: list[Incompatibility] = field(default_factory=list)
    deleted: dict[str, str] = field(default_factory=dict)  # path -> commit that deleted it
    warnings: list[str] = field(default_factory=list)
    personal_data: list[str] = field(default_factory=list)  # marks dropped since a version
    generated: list[FileProblem] = field(default_factory=list)  # files not their class's

    @property
    def ok(self) -> bool:
        return (
            not self.incompatibilities
            and not self.deleted
            and not self.personal_data
            and not self.generated
        )


def check_schemas(
    root: Path, *, classes: Mapping[str, type[BaseModel]] | None = None
) -> SchemaCheckReport:
    """Load the catalog under ``root`` (layout rules), compare each file with what its
    class generates (when ``classes`` is given, by event type), and check the
    compatibility history.

    Raises:
        SchemaError: a schema file breaks a layout rule (the catalog refuses it).
    """
    catalog = SchemaCatalog.load(root)
    history = SchemaHistory.open(root)
    report = SchemaCheckReport()
    if classes is not None:
        committed = {name: schema.path for name, schema in catalog.items()}
        report.generated = file_problems(classes, root, committed=committed)
    if history.repo is None:
        report.warnings.append(
            f"{root} is not in a git repository: there is no committed history to compare "
            "against; only the layout rules were checked"
        )
    elif history.shallow:
        report.warnings.append(
            "this is a shallow clone: versions older than its depth were not checked; "
            "run `git fetch --unshallow` for the full check"
        )
    for name, schema in sorted(catalog.items()):
        earlier = history.versions(root / schema.path)
        report.checked[name] = len(earlier)
        report.incompatibilities += check(name, schema.definition, earlier)
        for version in earlier:
            report.personal_data += [
                f"{name}: field '{field}' is marked {ATTRIBUTE} in {version.label} and no "
                "longer is: its new values would be written in clear beside sealed old ones; "
                "keep the mark"
                for field in unmarked(version.definition, schema.definition)
            ]
    report.deleted = history.deleted(root)
    return report

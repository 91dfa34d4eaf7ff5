"""What every provider class shares around its ports: the five interfaces an engine takes, and
closing it (``close()``, or a ``with`` block).

A provider holds one object per port it serves (``work_item_reader``, ``work_item_writer``,
``revision_reader``, ``revision_writer``), None for a role it does not serve
(``ProviderRoles``): the composition root then assembles the engine's interfaces from two
providers' attributes.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self

from domain.ports import (
    ProviderInterfaces,
    RevisionProviderReader,
    RevisionProviderWriter,
    SpecProviderReader,
    WorkProviderReader,
    WorkProviderWriter,
)


class ProviderBase:
    """A provider's ports, its ``interfaces``, and its context manager (``close`` on exit)."""

    work_item_reader: WorkProviderReader | None
    work_item_writer: WorkProviderWriter | None
    revision_reader: RevisionProviderReader | None
    revision_writer: RevisionProviderWriter | None

    def interfaces(self, spec_reader: SpecProviderReader) -> ProviderInterfaces | None:
        """The five interfaces an engine takes, when this provider serves both roles (None
        otherwise: the composition root assembles them from two providers' ports)."""
        if (
            self.work_item_reader is None
            or self.work_item_writer is None
            or self.revision_reader is None
            or self.revision_writer is None
        ):
            return None
        return ProviderInterfaces(
            work_item_reader=self.work_item_reader,
            work_item_writer=self.work_item_writer,
            revision_reader=self.revision_reader,
            revision_writer=self.revision_writer,
            spec_reader=spec_reader,
        )

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

"""Reading user input within the hard limits of :mod:`jobset_core.limits`.

* Files and streams are read in binary, at most ``MAX_FILE_BYTES + 1`` bytes (so ``/dev/zero``
  or an endless pipe costs 8 MiB, never more), and decoded as UTF-8 with the offset of the first
  bad byte in the error.
* YAML is composed by a safe loader that counts as it goes: it refuses nesting deeper than
  ``MAX_DEPTH`` at the node that crosses it (with that node's field path) and aliases that
  would add more than ``MAX_ALIAS_NODES`` nodes when expanded, at the alias, before anything is
  expanded. A recursive alias is refused too. The events come from libyaml's C parser when
  PyYAML has it (input it refuses is read again by PyYAML's own parser, which decides).
* A key written twice in one mapping (``kind:`` twice, ``name:`` twice, at any depth; in JSON
  too) is refused with its line and the first one's: the API server's strict decoding refuses
  duplicate fields, and PyYAML would silently keep the last.
* A file holds at most :data:`MAX_DOCUMENTS` documents (a bound of ours, far above real files).
* Python data (a mapping given directly) is walked without recursion for the same depth, for
  cycles and for ``MAX_NODES``.

Every refusal is a :class:`~jobset_core.errors.SpecError` naming the source.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import yaml
from yaml.composer import Composer
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from jobset_core.errors import Problem, SpecError, format_path
from jobset_core.limits import (
    MAX_ALIAS_NODES,
    MAX_DEPTH,
    MAX_DOCUMENTS,
    MAX_FILE_BYTES,
    MAX_NODES,
)

try:
    from yaml._yaml import CParser as _CParser
except ImportError:  # PyYAML built without libyaml
    _CParser = None  # type: ignore[assignment,misc]

__all__ = [
    "MAX_DOCUMENTS",
    "check_plain",
    "check_text_size",
    "decode",
    "load_yaml_documents",
    "read_bounded",
]


Loc = tuple[str | int, ...]

_TOO_BIG = (
    f"larger than {MAX_FILE_BYTES} bytes (jobset_core.limits.MAX_FILE_BYTES; the API server "
    "accepts at most 3 MiB per object): refused, not read further"
)


def _refuse(message: str, rule: str, source: str | None, path: str = "") -> SpecError:
    return SpecError([Problem(path, message, rule)], source)


def read_bounded(source: str | os.PathLike[str] | IO[bytes], label: str | None) -> str:
    """The text of a file (a path) or of a binary stream, read within ``MAX_FILE_BYTES``.

    Raises:
        SpecError: it cannot be read, is too large or is not UTF-8.
    """
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        try:
            with path.open("rb") as stream:
                data = stream.read(MAX_FILE_BYTES + 1)
        except OSError as err:
            raise _refuse(f"cannot read {path}: {err.strerror}", "read", label) from err
    else:
        data = source.read(MAX_FILE_BYTES + 1)
    return decode(data, label)


def decode(data: bytes, label: str | None) -> str:
    """``data`` (at most ``MAX_FILE_BYTES``) as UTF-8 text.

    Raises:
        SpecError: too large, or ``not UTF-8 text (byte N)``, N the offset of the first byte
            that is not.
    """
    if len(data) > MAX_FILE_BYTES:
        raise _refuse(_TOO_BIG, "file-size", label)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _refuse(f"not UTF-8 text (byte {err.start})", "not-utf8", label) from None


def check_text_size(text: str, label: str | None) -> None:
    """Refuse a string whose UTF-8 encoding is larger than ``MAX_FILE_BYTES``."""
    if len(text) > MAX_FILE_BYTES or (
        len(text) * 4 > MAX_FILE_BYTES
        and len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES
    ):
        raise _refuse(_TOO_BIG, "file-size", label)


class _Limits:
    """Composition within ``MAX_DEPTH`` and ``MAX_ALIAS_NODES``, noting duplicate keys.

    A mixin over PyYAML's composer (first in the loader's bases): the loader below supplies the
    events, from libyaml's C parser where PyYAML was built with it (the pure-Python scanner and
    parser cost about 2 s per MB), else from PyYAML's own. The composer recurses one level per
    nesting level, which the depth limit bounds. Each composed node's expanded size and height
    are kept, so an alias is charged what it would expand to.
    """

    anchors: dict[Any, Node]

    def _init_limits(self) -> None:
        self.path: list[str | int] = []
        self.document = 0
        self.alias_nodes = 0
        self.sizes: dict[int, tuple[int, int]] = {}
        self.duplicates: list[tuple[int, Loc, str]] = []
        self.document_start = "?"

    def compose_document(self) -> Node | None:
        self.sizes = {}
        self.document_start = _where(self._next_event())
        node: Node | None = super().compose_document()  # type: ignore[misc]
        self.document += 1
        return node

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self.path.append(_part(parent, index))
        try:
            if self._events().check_event(yaml.AliasEvent):
                self._charge_alias(self._next_event())
                node: Node | None = super().compose_node(parent, index)  # type: ignore[misc]
                return node
            if len(self.path) > MAX_DEPTH:
                raise self._refusal(
                    f"nested deeper than {MAX_DEPTH} levels (jobset_core.limits.MAX_DEPTH; "
                    f"{_where(self._next_event())}): a JobSet is at most 19 levels deep",
                    "yaml-depth",
                )
            node = super().compose_node(parent, index)  # type: ignore[misc]
            if node is not None:
                self.sizes[id(node)] = self._measure(node)
                if isinstance(node, MappingNode):
                    self._note_duplicates(node)
            return node
        finally:
            self.path.pop()

    def _events(self) -> yaml.SafeLoader:
        # The event methods (check_event, peek_event) come from the parser base.
        return self  # type: ignore[return-value]

    def _next_event(self) -> Any:
        return self._events().peek_event()  # type: ignore[no-untyped-call]

    def _note_duplicates(self, node: MappingNode) -> None:
        """Each key written again in the same mapping (the API server's strict decoding
        refuses duplicate fields; PyYAML would keep the last silently)."""
        first: dict[Any, ScalarNode] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, ScalarNode) or key_node.tag == _MERGE_TAG:
                continue  # a merge key (<<) may be overridden: that is what it is for
            key = key_node.value if key_node.tag == _STR_TAG else self._scalar(key_node)
            try:
                earlier = first.setdefault(key, key_node)
            except TypeError:  # an unhashable key: the constructor reports it
                continue
            if earlier is not key_node:
                parts = [part for part in self.path[1:] if part != ""]
                self.duplicates.append(
                    (
                        self.document,
                        (*parts, str(key_node.value)),
                        f"duplicate key {key_node.value!r} at {_where(key_node)} (first at "
                        f"{_where(earlier)}): the API server's strict decoding refuses "
                        "duplicate fields; keep one",
                    )
                )

    def _scalar(self, key_node: ScalarNode) -> Any:
        # A key as the constructor will read it (1, 0x1 and true are equal keys in Python).
        constructor: yaml.constructor.SafeConstructor = self  # type: ignore[assignment]
        return constructor.construct_object(key_node)

    def _measure(self, node: Node) -> tuple[int, int]:
        children: list[Node] = []
        if isinstance(node, SequenceNode):
            children = list(node.value)
        elif isinstance(node, MappingNode):
            children = [item for pair in node.value for item in pair]
        size, height = 1, 1
        for child in children:
            child_size, child_height = self.sizes.get(id(child), (1, 1))
            size += child_size
            height = max(height, child_height + 1)
        return size, height

    def _charge_alias(self, event: yaml.AliasEvent) -> None:
        node = self.anchors.get(event.anchor)
        if node is None:
            return  # undefined: PyYAML reports it
        where = _where(event)
        measured = self.sizes.get(id(node))
        if measured is None:
            raise self._refusal(
                f"alias *{event.anchor} refers to a node that contains it ({where}): "
                "a recursive document is not a JobSet",
                "yaml-aliases",
            )
        size, height = measured
        self.alias_nodes += size
        if self.alias_nodes > MAX_ALIAS_NODES:
            raise self._refusal(
                f"aliases expand to more than {MAX_ALIAS_NODES} nodes "
                f"(jobset_core.limits.MAX_ALIAS_NODES; crossed by *{event.anchor} at {where}): "
                "refused before expanding",
                "yaml-aliases",
            )
        if len(self.path) - 1 + height > MAX_DEPTH:
            raise self._refusal(
                f"alias *{event.anchor} nests deeper than {MAX_DEPTH} levels "
                f"(jobset_core.limits.MAX_DEPTH; {where})",
                "yaml-depth",
            )

    def _refusal(self, message: str, rule: str) -> _Refused:
        parts = [part for part in self.path[1:] if part != ""]
        return _Refused(self.document, tuple(parts), message, rule)


_MERGE_TAG = "tag:yaml.org,2002:merge"
_STR_TAG = "tag:yaml.org,2002:str"


class _PureLoader(_Limits, yaml.SafeLoader):
    """PyYAML's safe loader, all in Python."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._init_limits()


if _CParser is not None:

    class _CLoader(
        _Limits,
        Composer,
        _CParser,
        yaml.constructor.SafeConstructor,
        yaml.resolver.Resolver,
    ):
        """The same composition and construction over libyaml's events."""

        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)
            Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
            self._init_limits()


class _Refused(Exception):
    def __init__(self, document: int, loc: Loc, message: str, rule: str) -> None:
        super().__init__(message)
        self.document, self.loc, self.message, self.rule = document, loc, message, rule


def _where(event: Any) -> str:
    mark = getattr(event, "start_mark", None)
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "?"


def _part(parent: Node | None, index: Any) -> str | int:
    if parent is None:
        return ""
    if isinstance(parent, SequenceNode):
        return int(index)
    if isinstance(index, ScalarNode):
        return str(index.value)
    return "<key>"


def load_yaml_documents(text: str, label: str | None) -> list[Any]:
    """Every non-empty document of a YAML (or JSON) stream, composed within the limits.

    Raises:
        SpecError: a limit is crossed (with the field path and the document, when several),
            a mapping repeats a key (every repetition, with its line), there are more than
            :data:`MAX_DOCUMENTS` documents, or the text is not YAML (with line and column).
    """
    check_text_size(text, label)
    try:
        loader, documents = _compose_all(text, label, fast=_CParser is not None)
    except yaml.YAMLError as err:
        if _CParser is None:
            raise _not_yaml(err, label) from err
        # libyaml and PyYAML word their errors differently, and libyaml's scanner stops at
        # 1,000 nesting levels before the composer can refuse the 65th with its path: invalid
        # input is read again by PyYAML's own parser, which decides (and words) the refusal.
        try:
            loader, documents = _compose_all(text, label, fast=False)
        except yaml.YAMLError as again:
            raise _not_yaml(again, label) from again
    if loader.duplicates:
        raise SpecError(_duplicate_problems(loader.duplicates, documents), label)
    return [document for document in documents if document is not None]


def _compose_all(text: str, label: str | None, *, fast: bool) -> tuple[_Limits, list[Any]]:
    """The loader and every document (``None`` for an empty one).

    Raises:
        SpecError: a limit is crossed.
        yaml.YAMLError: the text is not YAML.
    """
    loader = _CLoader(text) if fast else _PureLoader(text)
    events = loader._events()
    documents: list[Any] = []
    kept = 0
    try:
        while events.check_data():  # type: ignore[no-untyped-call]
            document = events.get_data()
            documents.append(document)
            kept += document is not None
            if kept > MAX_DOCUMENTS:
                raise _refuse(
                    f"more than {MAX_DOCUMENTS} JobSet documents in one file (a bound of this "
                    "tool, not of Kubernetes, far above any real file; the next one starts at "
                    f"{loader.document_start}): split the file",
                    "too-many-documents",
                    label,
                )
    except _Refused as refused:
        prefix: Loc = (f"<document {refused.document}>",) if refused.document else ()
        path = format_path((*prefix, *refused.loc))
        raise _refuse(refused.message, refused.rule, label, path) from None
    finally:
        events.dispose()
    return loader, documents


def _not_yaml(err: yaml.YAMLError, label: str | None) -> SpecError:
    where = ""
    mark = getattr(err, "problem_mark", None)
    if mark is not None:
        where = f" at line {mark.line + 1}, column {mark.column + 1}"
    problem = getattr(err, "problem", None) or str(err)
    return _refuse(f"not valid YAML{where}: {problem}", "yaml", label)


def _duplicate_problems(found: list[tuple[int, Loc, str]], documents: list[Any]) -> list[Problem]:
    """The duplicate keys, each in its document as :func:`load_jobsets` numbers them (the
    non-empty ones), named only when the file holds several."""
    numbers: dict[int, int] = {}
    for position, document in enumerate(documents):
        if document is not None:
            numbers[position] = len(numbers)
    multi = len(numbers) > 1
    problems = []
    for position, loc, message in found:
        prefix: Loc = (f"<document {numbers.get(position, position)}>",) if multi else ()
        problems.append(Problem(format_path((*prefix, *loc)), message, "yaml-duplicate-key"))
    return problems


def check_plain(data: Any, label: str | None) -> None:
    """Refuse Python data nested deeper than ``MAX_DEPTH``, with more than ``MAX_NODES`` nodes
    (shared references counted at each use) or with a cycle; walked without recursion.

    Raises:
        SpecError: with the field path where the limit was crossed.
    """
    nodes = 0
    stack: list[tuple[Any, Loc, frozenset[int]]] = [(data, (), frozenset())]
    while stack:
        value, loc, ancestors = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise _refuse(
                f"more than {MAX_NODES} nodes (jobset_core.limits.MAX_NODES)",
                "too-many-nodes",
                label,
                format_path(loc),
            )
        if len(loc) >= MAX_DEPTH:
            raise _refuse(
                f"nested deeper than {MAX_DEPTH} levels (jobset_core.limits.MAX_DEPTH): "
                "a JobSet is at most 19 levels deep",
                "depth",
                label,
                format_path(loc),
            )
        if isinstance(value, Mapping):
            items: list[tuple[str | int, Any]] = [(str(k), v) for k, v in value.items()]
        elif isinstance(value, (list, tuple)):
            items = list(enumerate(value))
        else:
            continue
        if id(value) in ancestors:
            raise _refuse("contains itself (a cycle)", "cycle", label, format_path(loc))
        inner = ancestors | {id(value)}
        stack.extend((item, (*loc, key), inner) for key, item in reversed(items))

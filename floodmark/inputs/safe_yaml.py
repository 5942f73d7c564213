"""Loading YAML safely: one document, as ``yaml.safe_load`` gives it, nested no deeper than a sane limit.

Every YAML file floodmark reads (test definitions, a run's ``test.yaml``) goes through
:func:`load_yaml`. PyYAML alone is not safe against hostile nesting: libyaml's composer
(``CSafeLoader``) recurses on the C stack and kills the whole process with a segfault on a
document nested ~100,000 levels deep (``[[[[...`` or ``- - - -...``), and the pure-Python
loader raises ``RecursionError`` from about 1,000 levels. A results browser or a checker
must instead report the bad file and carry on.

So the loader here keeps libyaml's scanner and parser (fast, and iterative: an event stream,
no recursion), but composes the nodes in Python, counting open collections as it goes; the
first collection deeper than ``max_depth`` (100 unless told) stops the load with
:class:`YamlTooDeep`, a ``yaml.MarkedYAMLError`` naming the file, line and column, so every
caller that already handles ``yaml.YAMLError`` handles it too. Nesting built through
aliases (``&a [*a]``, or a chain of anchors each one deeper) counts the same, and a
document that contains itself is refused. A value Python cannot hold (``2026-13-45``, an
integer of 5,000 digits) is a ``yaml.YAMLError`` with its line too, not a bare ``ValueError``,
and so is a mapping key given twice (PyYAML keeps the last one silently).
Composing in Python makes a typical ``test.yaml`` take about 0.2 ms, 1.4 times the all-C
loader and a fifth of the pure-Python one; parsing stops at the limit, so a hostile document
is refused after only its first ``max_depth`` levels.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any, TypeVar

import yaml
from yaml.composer import Composer
from yaml.events import Event
from yaml.nodes import CollectionNode, MappingNode, Node, SequenceNode

MAX_DEPTH = 100


class YamlTooDeep(yaml.MarkedYAMLError):
    """A document nested deeper than the loader allows (or containing itself)."""


_Collection = TypeVar("_Collection", SequenceNode, MappingNode)


class _DepthLimited(Composer):
    """A composer that refuses collections nested more than ``max_depth`` deep."""

    max_depth = MAX_DEPTH
    _open = 0
    get_event: Callable[[], Event]  # from the parser (libyaml's or PyYAML's) this is mixed with
    peek_event: Callable[[], Event]

    def compose_document(self) -> Node | None:  # type: ignore[override]
        self._open = 0
        self.get_event()  # DocumentStartEvent
        node = self.compose_node(None, None)  # type: ignore[arg-type]  # (the stub's index is too narrow)
        self.get_event()  # DocumentEndEvent
        if self.anchors and node is not None:  # aliases (only possible with anchors) can nest further
            _check_height(node, self.max_depth)
        self.anchors = {}
        return node

    def compose_sequence_node(self, anchor: Any) -> SequenceNode:
        return self._one_level_deeper(super().compose_sequence_node, anchor)

    def compose_mapping_node(self, anchor: Any) -> MappingNode:
        return self._one_level_deeper(super().compose_mapping_node, anchor)

    def _one_level_deeper(self, compose: Callable[[Any], _Collection], anchor: Any) -> _Collection:
        if self._open >= self.max_depth:
            mark: Any = self.peek_event().start_mark  # libyaml's own Mark class when the parser is libyaml's
            raise YamlTooDeep(None, None, f"nested more than {self.max_depth} levels deep", mark)
        self._open += 1
        try:
            return compose(anchor)
        finally:
            self._open -= 1


class _SafeValues(yaml.constructor.SafeConstructor):
    """The safe constructor, but a scalar Python will not hold is a YAML error with its line.

    PyYAML lets ``ValueError`` out for ``2026-13-45`` or an integer of 5,000 digits; a caller
    that handles ``yaml.YAMLError`` for "malformed" would miss those.
    """

    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Any, Any]:  # type: ignore[override]
        """A mapping; a key given twice is an error (PyYAML would keep the last silently)."""
        if isinstance(node, MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:
                    continue  # an unhashable key: PyYAML's own check names it
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark,
                        f"the key {str(key)[:40]!r} is given twice", key_node.start_mark)
        return super().construct_mapping(node, deep)  # type: ignore[arg-type]

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as e:
            raise yaml.constructor.ConstructorError(
                None, None, f"not a valid {node.tag.rsplit(':', 1)[-1]}: {e}", node.start_mark) from None


class _PyLoader(_DepthLimited, _SafeValues, yaml.SafeLoader):
    """The pure-Python safe loader, depth-limited."""


_CParser: Any = getattr(getattr(yaml, "cyaml", None), "CParser", None)
_Loader: type[Any]
if _CParser is not None and getattr(yaml, "__with_libyaml__", False):

    class _CLoader(_DepthLimited, _CParser, _SafeValues, yaml.resolver.Resolver):  # type: ignore[misc]
        """libyaml's parser feeding the depth-limited Python composer and the safe constructor."""

        def __init__(self, stream: Any) -> None:
            _CParser.__init__(self, stream)
            Composer.__init__(self)
            _SafeValues.__init__(self)
            yaml.resolver.Resolver.__init__(self)

    _Loader = _CLoader
else:  # pragma: no cover (libyaml is a dependency, but PyYAML builds without it)
    _Loader = _PyLoader


def load_yaml(text: str | bytes, source: str = "<string>", *, max_depth: int = MAX_DEPTH) -> Any:
    """The one document in ``text`` (None for an empty one), exactly as ``yaml.safe_load`` reads it.

    Raises ``yaml.YAMLError`` for anything malformed, naming ``source`` and the line in its
    message: :class:`YamlTooDeep` for nesting deeper than ``max_depth``, and a
    ``ConstructorError`` (not PyYAML's bare ``ValueError``) for a value Python cannot hold,
    such as the date ``2026-13-45``.
    """
    return _load(_Loader, text, source, max_depth)


def _load(loader_class: type[Any], text: str | bytes, source: str, max_depth: int) -> Any:
    stream: io.StringIO | io.BytesIO = io.StringIO(text) if isinstance(text, str) else io.BytesIO(text)
    stream.name = source  # type: ignore[union-attr]  # the name libyaml and the Python reader put in marks
    loader = loader_class(stream)
    loader.max_depth = max_depth
    try:
        return loader.get_single_data()
    except RecursionError:  # only from a caller already deep in its own stack; never a crash
        raise YamlTooDeep(None, None, f"{source}: nested too deeply to load", None) from None
    finally:
        loader.dispose()


def describe_error(error: yaml.YAMLError) -> str:
    """A one-line account of a YAML error: ``line N, column M: problem`` (or just the problem)."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or (str(error).splitlines() or [type(error).__name__])[0]
    if mark is None:
        return str(problem)
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"


def _children(node: CollectionNode) -> list[Node]:
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return list(node.value)


def _check_height(root: Node, limit: int) -> None:
    """Refuse a node graph (aliases make it a DAG, or cyclic) deeper than ``limit`` collections.

    Iterative depth-first search, so a deep graph cannot exhaust the stack while being measured.
    """
    if not isinstance(root, CollectionNode):
        return
    heights: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[CollectionNode] = [root]
    while stack:
        node = stack[-1]
        key = id(node)
        if key in heights:
            stack.pop()
            continue
        children = [c for c in _children(node) if isinstance(c, CollectionNode)]
        if key not in open_nodes:
            open_nodes.add(key)
            for child in children:
                if id(child) in open_nodes:
                    raise YamlTooDeep(None, None, "contains itself through an alias (nested without end)", child.start_mark)
                if id(child) not in heights:
                    stack.append(child)
            continue
        height = 1 + max((heights[id(c)] for c in children), default=0)
        if height > limit:
            raise YamlTooDeep(None, None, f"nested more than {limit} levels deep (through aliases)", node.start_mark)
        heights[key] = height
        open_nodes.discard(key)
        stack.pop()

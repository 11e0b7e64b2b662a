"""YAML a user wrote (recipes, sweep files, `--set` values), read with bounds and without silent surprises.

    data = load_yaml(text, "recipes/demo.yaml")   # -> dict/list/scalar, or an InspoError naming file and line

A few hundred bytes of YAML can ask for unbounded work: 500 nested brackets overflow the parser's recursion, and
aliases of aliases ("billion laughs") expand to 10^9 nodes when anything walks the result. So the text may be at
most `MAX_BYTES`, nesting at most `MAX_DEPTH` deep and, with every alias expanded, at most `MAX_NODES` nodes; an
alias that refers to its own anchor is refused. A key given twice in one mapping (which YAML keeps silently, the
last winning) is refused too, naming the key and both lines. Merge keys (`<<: *defaults`) still override as usual.
"""

from __future__ import annotations

from typing import Any

import yaml

from inspo_cli.errors import InspoError

MAX_BYTES = 1 << 20  # a recipe is ~3 KB, a sweep file less
MAX_DEPTH = 32  # recipes nest 3 deep, sweep files 5
MAX_NODES = 100_000  # scalars, lists and mappings with every alias expanded
_MERGE = "tag:yaml.org,2002:merge"


class _Refused(Exception):
    def __init__(self, line: int | None, message: str):
        super().__init__(message)
        self.line, self.message = line, message


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader with a depth limit while composing, and duplicate keys refused while constructing."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise _Refused(mark.line + 1, f"nested more than {MAX_DEPTH} deep")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            lines: dict[tuple[str, str], int] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key, line = (key_node.tag, key_node.value), key_node.start_mark.line + 1
                if key in lines:
                    raise _Refused(
                        line, f"key {key_node.value!r} is given twice (lines {lines[key]} and {line}); keep one"
                    )
                lines[key] = line
        return super().construct_mapping(node, deep=deep)

    def get_single_data(self):
        node = self.get_single_node()
        if node is None:
            return None
        _check_expansion(node)
        return self.construct_document(node)


def _check_expansion(root: yaml.Node) -> None:
    """Count the nodes and depth the document has with every alias expanded (iteratively, each node once)."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            if size[key] > MAX_NODES:
                raise _Refused(
                    node.start_mark.line + 1,
                    f"expands to more than {MAX_NODES:,} values (aliases of aliases); write the values out",
                )
            if depth[key] > MAX_DEPTH:
                raise _Refused(
                    node.start_mark.line + 1, f"nested more than {MAX_DEPTH} deep once its aliases are expanded"
                )
            continue
        if key in size:
            continue
        on_path.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in on_path:
                raise _Refused(child.start_mark.line + 1, "an alias refers to the value that contains it")
            if id(child) not in size:
                stack.append((child, False))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def load_yaml(text: str, where: str) -> Any:
    """Parse `text` (from `where`, a file or `--set KEY`) within the bounds above; a YAML syntax error is left as
    `yaml.YAMLError` for the caller to word, anything refused is an `InspoError` `<where>: line N: <what>; <fix>`."""
    size = len(text.encode("utf-8"))
    if size > MAX_BYTES:
        raise InspoError(
            f"{where}: {size:,} bytes, more than the {MAX_BYTES:,} a recipe, sweep or value may have; "
            "split it or point to data files instead"
        )
    try:
        return yaml.load(text, Loader=_BoundedLoader)
    except _Refused as refused:
        line = f" line {refused.line}:" if refused.line is not None else ""
        raise InspoError(f"{where}:{line} {refused.message}") from None

"""docs/reference/api.md, generated from the code: the seams a contributor implements (a retriever, a policy
backend, an optimizer LM, a proposer, a selection rule, a parent rule, an inference method, a tool), the types they
pass, and the registry records that name them, each with its import path, its docstring and its methods' signatures
(`inspect`), so the page says what the code says. Nothing here needs a GPU: the modules read import no torch.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from inspo_cli import registry
from inspo_cli.docs_gen.markdown import code, docstring, generated_note, prose

PAGE = "reference/api.md"
WIDTH = 100  # a signature longer than this is written one parameter per line


@dataclass(frozen=True)
class Seam:
    module: str
    name: str
    kind: str  # "protocol", "alias" (a type alias: its module's docstring says what it stands for), "class"
    what: str  # one line for the summary table
    registered: registry.Registry | None = None  # the registry that names implementations of it, if one does
    how: str = ""  # how the registry holds one, where its attribute does not say
    more: str = ""  # a module whose docstring completes the contract


SEAMS = (
    Seam(
        "retriever.search",
        "Retriever",
        "protocol",
        "a search engine: queries in, passages out",
        registry.RETRIEVER_KINDS,
        how="an index kind's module, whose `load` opens one",
        more="retriever.kinds",
    ),
    Seam("inspo_cli.policy.generation", "PolicyBackend", "protocol", "the policy's token-level generation"),
    Seam(
        "inspo_cli.instructions.providers.language_model",
        "LanguageModel",
        "protocol",
        "the optimizer LM the proposers ask",
    ),
    Seam(
        "inspo_cli.instructions.proposers.base",
        "ProposalPrompt",
        "protocol",
        "a proposer: the prompt asking the optimizer for new instructions",
        registry.PROPOSERS,
    ),
    Seam(
        "inspo_cli.instructions.selection.base",
        "Selector",
        "protocol",
        "which instruction each question group is rolled out with",
    ),
    Seam(
        "inspo_cli.instructions.selection.base",
        "Build",
        "alias",
        "a selection rule: builds a `Selector`",
        registry.SELECTIONS,
    ),
    Seam(
        "inspo_cli.instructions.parents",
        "Choose",
        "alias",
        "a parent rule: which instructions parent the next generation",
        registry.PARENTS,
    ),
    Seam(
        "inspo_cli.evaluation.methods.base",
        "Method",
        "protocol",
        "an inference method: questions in, predictions out",
        registry.METHODS,
    ),
    Seam(
        "inspo_cli.agent.tools.base",
        "Tool",
        "class",
        "a tool the policy calls: batched calls in, one observation each out",
        registry.TOOLS,
        how="a module's `build(context)`, which returns one",
    ),
)
TYPES = (  # what the seams take and give
    Seam("retriever.corpus", "Passage", "class", "what a retriever returns"),
    Seam("inspo_cli.policy.generation", "Generation", "class", "what a policy backend returns"),
    Seam("inspo_cli.instructions.selection.base", "Arm", "class", "what a selection rule sees of an instruction"),
    Seam("inspo_cli.evaluation.methods.base", "MethodContext", "class", "what an inference method runs with"),
    Seam("inspo_cli.evaluation.methods.base", "Prediction", "class", "what an inference method returns"),
    Seam("inspo_cli.agent.tools.base", "ToolContext", "class", "what building a tool may use"),
    Seam("inspo_cli.agent.tools.base", "Observation", "class", "what a tool returns for each call"),
)
RECORDS = (
    Seam("inspo_cli.registry", "Strategy", "class", "one registered strategy"),
    Seam("inspo_cli.registry", "Registry", "class", "the strategies one recipe key accepts"),
)


def markdown() -> str:
    """The whole page."""
    out = [
        "# Seams (API)",
        "",
        generated_note(),
        "",
        "The interfaces a contributor implements, from the code. A *protocol* (`typing.Protocol`) is structural: "
        "any object with these methods fits, nothing is inherited. Most seams are named in a registry "
        "([Strategies](strategies.md)): a module providing the registry's attribute, registered by one line in "
        "`inspo_cli/registry.py` or named by a recipe as `package.module:object`; the contributing guide walks "
        "through adding one.",
        "",
        "| seam | import | what it is | registered as |",
        "|---|---|---|---|",
    ]
    for seam in SEAMS:
        out.append(
            f"| [{seam.name}](#{seam.name.lower()}) | {code(f'from {seam.module} import {seam.name}')} | "
            f"{_kind(seam)}: {prose(seam.what)} | {_registered(seam)} |"
        )
    out += [
        "",
        "Below: [the seams](#the-seams), [the types they pass](#the-types-they-pass) and [the registry "
        "records](#the-registry-records).",
        "",
        "## The seams",
        "",
    ]
    for seam in SEAMS:
        out += _section(seam)
    out += ["## The types they pass", ""]
    for seam in TYPES:
        out += _section(seam)
    out += [
        "## The registry records",
        "",
        "Every strategy list is one `Registry` of `Strategy` records:",
        "",
        "| registry | recipe key | a registered module provides | names |",
        "|---|---|---|---|",
    ]
    for name, entry in _registries():
        out.append(
            f"| {code(f'inspo_cli.registry.{name}')} | {code(entry.key)} | "
            f"{code(entry.attribute) if entry.attribute else 'its target: the module, or the object'} | "
            f"{', '.join(code(key) for key in entry)} |"
        )
    out.append("")
    for seam in RECORDS:
        out += _section(seam)
    return "\n".join(out).rstrip("\n") + "\n"


def _registries() -> list[tuple[str, registry.Registry]]:
    named = {id(value): name for name, value in vars(registry).items() if isinstance(value, registry.Registry)}
    return [(named[id(entry)], entry) for entry in registry.REGISTRIES]


def _kind(seam: Seam) -> str:
    obj = _object(seam)
    if seam.kind == "alias":
        return "type alias"
    if seam.kind == "protocol":
        return "protocol" + (" (runtime-checkable)" if getattr(obj, "_is_runtime_protocol", False) else "")
    if dataclasses.is_dataclass(obj):
        return "frozen dataclass" if vars(obj)["__dataclass_params__"].frozen else "dataclass"
    if inspect.isabstract(obj):
        return "abstract class"
    bases = [_annotation(base) for base in getattr(obj, "__orig_bases__", ())]
    return f"class, a {', '.join(code(base) for base in bases)}" if bases else "class"


def _registered(seam: Seam) -> str:
    if seam.registered is None:
        return ""
    how = prose(seam.how) if seam.how else f"a module's {code(seam.registered.attribute or seam.name)}"
    return f"{code(seam.registered.key)}: {how}"


def _object(seam: Seam) -> Any:
    return getattr(importlib.import_module(seam.module), seam.name)


def _section(seam: Seam) -> list[str]:
    obj = _object(seam)
    module = importlib.import_module(seam.module)
    out = [
        f"### {seam.name}",
        "",
        f"{code(f'from {seam.module} import {seam.name}')}: {'an' if _kind(seam)[0] in 'aeiou' else 'a'} {_kind(seam)}"
        + (f", registered as {_registered(seam)}" if seam.registered else "")
        + ".",
        "",
    ]
    if seam.kind == "alias":
        out += ["```python", f"{seam.name} = {_annotation(obj)}", "```", "", f"From `{seam.module}`:", ""]
        out += [*docstring(module.__doc__), ""]
        return out
    own = obj.__dict__.get("__doc__")
    if own and not (dataclasses.is_dataclass(obj) and own.startswith(f"{seam.name}(")):  # not dataclass's own
        out += [*docstring(own), ""]
    elif seam.kind == "protocol" or inspect.isabstract(obj):  # no docstring of its own: its module says what it is for
        out += [f"From `{seam.module}`:", "", *docstring(module.__doc__), ""]
    if dataclasses.is_dataclass(obj):
        out += _fields(obj)
    else:
        out += _class_attributes(obj)
    attributes = _init_attributes(obj)
    if attributes:
        out += ["| attribute | what it holds |", "|---|---|"]
        out += [f"| {code(name)} | {prose(comment)} |" for name, comment in attributes]
        out.append("")
    for name, member in _members(obj):
        out += _member(obj, name, member)
    if seam.more:
        out += [f"From `{seam.more}`:", "", *docstring(importlib.import_module(seam.more).__doc__), ""]
    return out


def _members(cls: type) -> list[tuple[str, Any]]:
    """The methods and properties a class defines itself: public ones, `__call__` and (for a class that is not a
    dataclass) `__init__`."""
    shown = []
    for name, member in cls.__dict__.items():
        if name.startswith("_") and name not in ("__call__", "__init__"):
            continue
        if name == "__init__" and (dataclasses.is_dataclass(cls) or getattr(cls, "_is_protocol", False)):
            continue
        if isinstance(member, (property, staticmethod, classmethod)) or inspect.isfunction(member):
            shown.append((name, member))
    return shown


def _member(cls: type, name: str, member: Any) -> list[str]:
    if isinstance(member, property):
        returns = _signature(member.fget).return_annotation if member.fget else inspect.Signature.empty
        head = f"{name}: {_annotation(returns)}" if returns is not inspect.Signature.empty else name
        out = [f"#### {code(f'{cls.__name__}.{name}')}", "", "```python", f"@property\n{head}", "```", ""]
        doc = member.__doc__
    else:
        function = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
        title = f"{cls.__name__}(...)" if name == "__init__" else f"{cls.__name__}.{name}"
        decorator = f"@{type(member).__name__}\n" if isinstance(member, (staticmethod, classmethod)) else ""
        out = [f"#### {code(title)}", "", "```python", decorator + _def(name, function), "```", ""]
        doc = function.__doc__
    if doc:
        out += [*docstring(doc), ""]
    return out


def _signature(function: Callable[..., Any]) -> inspect.Signature:
    """The signature as written: annotations are the source's text (every module here has postponed annotations)."""
    signature = inspect.signature(function, eval_str=False)
    params = [
        param.replace(annotation=_Text(param.annotation)) if isinstance(param.annotation, str) else param
        for param in signature.parameters.values()
    ]
    returns = signature.return_annotation
    return signature.replace(
        parameters=params, return_annotation=_Text(returns) if isinstance(returns, str) else returns
    )


class _Text(str):
    """An annotation that `inspect` writes as its text, not as a quoted string (`-> "Passage"` too)."""

    def __repr__(self) -> str:
        return self.strip("'\"")


def _def(name: str, function: Callable[..., Any]) -> str:
    signature = _signature(function)
    line = f"def {name}{signature}"
    if len(line) <= WIDTH:
        return line
    params = [str(param) for param in signature.parameters.values()]
    returns = (
        ""
        if signature.return_annotation is inspect.Signature.empty
        else f" -> {inspect.formatannotation(signature.return_annotation)}"
    )
    return f"def {name}(\n" + "".join(f"    {param},\n" for param in params) + f"){returns}"


def _annotation(annotation: Any) -> str:
    """`typing.Callable[[typing.Sequence[pkg.mod.Arm], ForwardRef('X'), int], ...]` as written in the source."""
    text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
    text = re.sub(r"ForwardRef\('([^']+)'[^)]*\)", r"\1", text)
    return re.sub(r"\b(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_]\w*)", "", text)


def _fields(cls: Any) -> list[str]:
    comments = _comments(inspect.getsource(cls), r"^\s{4}(\w+)\s*:")
    out = ["| field | type | default | what it holds |", "|---|---|---|---|"]
    for field in dataclasses.fields(cls):
        if field.default is not dataclasses.MISSING:
            default = code(repr(field.default))
        elif field.default_factory is not dataclasses.MISSING:
            default = code(f"{getattr(field.default_factory, '__name__', 'factory')}()")
        else:
            default = ""
        out.append(
            f"| {code(field.name)} | {code(_annotation(field.type))} | {default} | "
            f"{prose(comments.get(field.name, ''))} |"
        )
    return [*out, ""]


def _class_attributes(cls: type) -> list[str]:
    """`name: str  # as registered ...` in a class body that is no dataclass: what a subclass sets, with comments."""
    own = cls.__dict__.get("__annotations__", {})
    if not own:
        return []
    comments = _comments(inspect.getsource(cls), r"^\s{4}(\w+)\s*:")
    out = ["| attribute | type | default | what it holds |", "|---|---|---|---|"]
    for name, annotation in own.items():
        default = code(repr(cls.__dict__[name])) if name in cls.__dict__ else ""
        out.append(f"| {code(name)} | {code(_annotation(annotation))} | {default} | {prose(comments.get(name, ''))} |")
    return [*out, ""]


def _init_attributes(cls: type) -> list[tuple[str, str]]:
    """`self.key = key  # the recipe key ...` in `__init__`: the attributes a class sets, with their comments."""
    init = cls.__dict__.get("__init__")
    if dataclasses.is_dataclass(cls) or not inspect.isfunction(init):
        return []
    return list(_comments(inspect.getsource(init), r"^\s*self\.(\w+)\s*(?::[^=]*)?=").items())


def _comments(source: str, name_pattern: str) -> dict[str, str]:
    """name -> the comment ending the line that `name_pattern` matches (the source's one-line field notes)."""
    found = {}
    for line in source.splitlines():
        match = re.match(name_pattern, line)
        comment = re.search(r"\s#\s*(?!type:)(.*)$", line)
        if match and match[1] not in found:
            found[match[1]] = comment[1].strip() if comment else ""
    return found

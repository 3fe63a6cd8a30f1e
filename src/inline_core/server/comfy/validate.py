"""A ComfyUI prompt checked as ComfyUI's `validate_prompt` checks it, before the importer sees it:
every node's class must be one this server runs (`missing_node_type`), there must be an output,
and every node an output needs must have its required inputs, links of the right type and values
in range and in their lists (`prompt_outputs_failed_validation`, with each node's errors)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, cast

from inline_core.importer.prompt_nodes import OUTPUT_NODE_TYPES, upstream
from inline_core.server.comfy.errors import ComfyError, InputError, NodeErrors
from inline_core.server.comfy.node_defs import NodeDef, Picker
from inline_core.server.comfy.object_info import Choices, all_inputs

Prompt = dict[str, dict[str, Any]]


def read_prompt(raw: object, served: Mapping[str, NodeDef]) -> Prompt:
    """The prompt's nodes, each a `{class_type, inputs}` object; `missing_node_type` for a node
    without a class, or with one this server does not run (not in `served`)."""
    if not isinstance(raw, Mapping) or not raw:
        raise ComfyError("no_prompt", "No prompt provided", "No prompt provided")
    prompt: Prompt = {}
    for key, value in cast(Mapping[object, object], raw).items():
        node_id = str(key)
        node: Mapping[str, Any] = (
            cast(Mapping[str, Any], value) if isinstance(value, Mapping) else {}
        )
        class_type = node.get("class_type")
        title = _title(node)
        if not isinstance(class_type, str) or not class_type:
            raise ComfyError(
                "missing_node_type",
                "Cannot execute because a node is missing the class_type property.",
                f"Node ID '#{node_id}'",
                extra_info={"node_id": node_id, "class_type": None, "node_title": title},
            )
        if class_type not in served:
            raise ComfyError(
                "missing_node_type",
                f"Cannot execute because node {class_type} does not exist: Inline Core does not "
                "run it.",
                f"Node ID '#{node_id}'",
                extra_info={"node_id": node_id, "class_type": class_type, "node_title": title},
            )
        raw_inputs: object = node.get("inputs", {})
        inputs: Mapping[str, Any] = (
            cast(Mapping[str, Any], raw_inputs) if isinstance(raw_inputs, Mapping) else {}
        )
        prompt[node_id] = {**node, "inputs": dict(inputs)}
    return prompt


def _title(node: Mapping[str, Any]) -> str | None:
    meta = node.get("_meta")
    if isinstance(meta, Mapping):
        title = cast(Mapping[str, Any], meta).get("title")
        return title if isinstance(title, str) else None
    return None


def outputs_of(prompt: Prompt, targets: object) -> list[str]:
    """The output nodes to run: `partial_execution_targets` where given, else every output."""
    if isinstance(targets, list) and targets:
        chosen = [str(t) for t in cast(list[object], targets)]
        outputs = [t for t in chosen if t in prompt]
    else:
        outputs = [k for k, v in prompt.items() if v["class_type"] in OUTPUT_NODE_TYPES]
    if not outputs:
        raise ComfyError("prompt_no_outputs", "Prompt has no outputs", "")
    return outputs


def check_prompt(prompt: Prompt, outputs: list[str], choices: Choices) -> None:
    """Raise `prompt_outputs_failed_validation` with each failing node's errors."""
    failed: dict[str, NodeErrors] = {}
    for output in outputs:
        bad = False
        for node_id in sorted(upstream(prompt, output)):
            errors = node_errors(prompt, node_id, choices)
            if errors:
                bad = True
                entry = failed.setdefault(node_id, NodeErrors(prompt[node_id]["class_type"]))
                if not entry.errors:
                    entry.errors = errors
            if bad and node_id in failed and output not in failed[node_id].dependent_outputs:
                failed[node_id].dependent_outputs.append(output)
    if failed:
        details = "; ".join(
            f"{v.class_type} {k}: {e.message} ({e.details})"
            for k, v in failed.items()
            for e in v.errors
        )
        raise ComfyError(
            "prompt_outputs_failed_validation",
            "Prompt outputs failed validation",
            details,
            node_errors=failed,
        )


def node_errors(prompt: Prompt, node_id: str, choices: Choices) -> list[InputError]:
    node = prompt[node_id]
    inputs: dict[str, Any] = node["inputs"]
    errors: list[InputError] = []
    for name, (spec, required) in all_inputs(choices.defs[node["class_type"]]).items():
        if name not in inputs:
            if required:
                errors.append(
                    InputError("required_input_missing", "Required input is missing", name, name)
                )
            continue
        value = inputs[name]
        if isinstance(value, list):
            problem = _link_error(prompt, name, cast(list[Any], value), spec, choices.defs)
        else:
            problem = _value_error(name, value, spec, choices)
        if problem is not None:
            errors.append(problem)
    return errors


def _spec_type(spec: Any) -> str:
    if isinstance(spec, Picker):
        return "COMBO"
    head = spec[0]
    return "COMBO" if isinstance(head, list) else str(head)


def _link_error(
    prompt: Prompt, name: str, link: list[Any], spec: Any, defs: Mapping[str, NodeDef]
) -> InputError | None:
    if len(link) != 2 or not isinstance(link[1], int) or isinstance(link[1], bool):
        return InputError(
            "bad_linked_input",
            "Bad linked input, must be a length-2 list of [node_id, slot_index]",
            name,
            name,
            {"received_value": link},
        )
    source = prompt.get(str(link[0]))
    if source is None:
        return InputError(
            "bad_linked_input",
            f"Bad linked input: node {link[0]} is not in the prompt",
            name,
            name,
            {"received_value": link},
        )
    source_def = defs[source["class_type"]]
    if source_def.untyped:
        return None  # its outputs are not declared: the importer checks the link
    produced = source_def.outputs
    slot = link[1]
    if not 0 <= slot < len(produced):
        return InputError(
            "bad_linked_input",
            f"Bad linked input: {source['class_type']} has no output {slot}",
            name,
            name,
            {"received_value": link},
        )
    received, wanted = produced[slot][0], _spec_type(spec)
    if "*" in (received, wanted) or received == wanted or wanted in received.split(","):
        return None
    if wanted == "COMBO" and received in ("STRING", "COMBO"):
        return None
    return InputError(
        "return_type_mismatch",
        "Return type mismatch between linked nodes",
        f"{name}, received_type({received}) mismatch input_type({wanted})",
        name,
        {"received_type": received, "linked_node": link},
    )


def _value_error(name: str, value: Any, spec: Any, choices: Choices) -> InputError | None:
    kind = _spec_type(spec)
    options: dict[str, Any] = {}
    if not isinstance(spec, Picker) and len(spec) > 1 and isinstance(spec[1], dict):
        options = cast(dict[str, Any], spec[1])
    extra = {"input_config": None, "received_value": value}
    if kind == "COMBO":
        allowed = choices.of(spec.source) if isinstance(spec, Picker) else list(spec[0])
        if value not in allowed:
            shown = ", ".join(map(str, allowed[:20])) + (", ..." if len(allowed) > 20 else "")
            return InputError(
                "value_not_in_list",
                "Value not in list",
                f"{name}: '{value}' not in [{shown}]",
                name,
                extra,
            )
        return None
    if kind in ("INT", "FLOAT"):
        number = _number(value, integer=kind == "INT")
        if number is None:
            return InputError(
                "invalid_input_type",
                f"Failed to convert an input value to a {kind} value",
                f"{name}, {value!r}",
                name,
                extra,
            )
        low, high = options.get("min"), options.get("max")
        if low is not None and number < low:
            return InputError(
                "value_smaller_than_min",
                f"Value {value} smaller than min of {low}",
                f"{name}",
                name,
                extra,
            )
        if high is not None and number > high:
            return InputError(
                "value_bigger_than_max",
                f"Value {value} bigger than max of {high}",
                f"{name}",
                name,
                extra,
            )
        return None
    if kind == "BOOLEAN" and not isinstance(value, bool):
        return InputError(
            "invalid_input_type",
            "Failed to convert an input value to a BOOLEAN value",
            f"{name}, {value!r}",
            name,
            extra,
        )
    if kind == "STRING" and not isinstance(value, str | int | float):
        return InputError(
            "invalid_input_type",
            "Failed to convert an input value to a STRING value",
            f"{name}, {value!r}",
            name,
            extra,
        )
    if kind not in ("INT", "FLOAT", "BOOLEAN", "STRING", "*"):  # a socket given a constant
        return InputError(
            "invalid_input_type",
            f"Input {name} takes a {kind} link, not a value",
            f"{name}, {value!r}",
            name,
            extra,
        )
    return None


def _number(value: Any, *, integer: bool) -> float | None:
    """A JSON number as the input's type takes it (a whole float counts as an INT)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    if not math.isfinite(number) or (integer and not number.is_integer()):
        return None
    return number

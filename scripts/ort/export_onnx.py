#!/usr/bin/python3
"""Exports a relserve-model directory (config.json + model.safetensors, DeBERTa-v2/v3 or T5) to
ONNX with transformers 4.40.2's own modeling code, for scripts/bench-ort.sh.

  TRANSFORMERS_SRC=/path/to/transformers-v4.40.2 /usr/bin/python3 scripts/ort/export_onnx.py \
      --model build/bench-models/t5-base --out build/ort/t5-base.onnx

Runs with Debian's python3-torch 1.13 and python3-onnx 1.12 (use /usr/bin/python3, not a pyenv
python). transformers is not packaged in Debian: TRANSFORMERS_SRC is a checkout of
huggingface/transformers at tag v4.40.2 (commit 4fdf58afb72b0754da30037fc800b6044e7d9c99), e.g.
  git clone --branch v4.40.2 --depth 1 https://github.com/huggingface/transformers /tmp/transformers-v4.40.2
It imports from TRANSFORMERS_SRC/src; huggingface_hub, safetensors and tokenizers (not in Debian
either) come from the stand-ins in scripts/ort/stubs when they are not installed.

What is exported: the backbone (DebertaV2Model, T5EncoderModel) with inputs input_ids and
attention_mask (int64, dynamic batch and sequence axes) and output last_hidden_state; with
--head classifier, DebertaV2ForSequenceClassification with outputs last_hidden_state and logits.
A directory saved as a classifier (keys deberta.*, pooler.*, classifier.*) exports its backbone by
default: the head's keys are reported and left out. Weights are loaded strictly (missing or
unexpected keys are an error). float32, opset 14, eval mode.

After exporting it writes OUT.check.json: a small batch (two rows, one padded, longer than the
relative-position windows so the logarithmic buckets are used) with transformers' outputs, for
`node scripts/ort/run_ort.mjs --check` to compare against ONNX Runtime.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def die(message):
    print(f"export_onnx.py: {message}", file=sys.stderr)
    sys.exit(2)


def import_transformers():
    src = os.environ.get("TRANSFORMERS_SRC")
    if not src:
        die(
            "TRANSFORMERS_SRC is not set. It must point at a checkout of huggingface/transformers at tag "
            "v4.40.2 (not packaged in Debian, and not vendored here), for example:\n"
            "  git clone --branch v4.40.2 --depth 1 https://github.com/huggingface/transformers /tmp/transformers-v4.40.2\n"
            "  (or, from any clone: git worktree add /tmp/transformers-v4.40.2 v4.40.2)\n"
            "  export TRANSFORMERS_SRC=/tmp/transformers-v4.40.2"
        )
    package = os.path.join(src, "src", "transformers", "__init__.py")
    if not os.path.isfile(package):
        die(f"TRANSFORMERS_SRC={src} has no src/transformers/__init__.py (it must be the repository's root)")
    sys.path.insert(0, os.path.join(src, "src"))
    # Stand-ins go last on the path: a real huggingface_hub / safetensors / tokenizers wins.
    sys.path.append(os.path.join(HERE, "stubs"))
    import transformers

    if transformers.__version__ != "4.40.2":
        print(f"export_onnx.py: warning: transformers {transformers.__version__} at {src}, expected 4.40.2",
              file=sys.stderr)
    return transformers


def import_plain_modeling():
    """scripts/ort/plain_modeling.py in the shape build_model reads from a transformers module."""
    sys.path.insert(0, HERE)
    sys.path.append(os.path.join(HERE, "stubs"))
    import plain_modeling

    def config_class(model_type):
        class Loaded:
            @staticmethod
            def from_json_file(path):
                with open(path) as f:
                    values = json.load(f)
                values.setdefault("model_type", model_type)
                return plain_modeling.Config(values)
        return Loaded

    class Plain:
        __version__ = "plain_modeling (scripts/ort/plain_modeling.py)"
        plain = True
        DebertaV2Config = config_class("deberta-v2")
        T5Config = config_class("t5")
        DebertaV2Model = plain_modeling.DebertaV2Model
        T5EncoderModel = plain_modeling.T5EncoderModel

        @staticmethod
        def DebertaV2ForSequenceClassification(config):
            die("--head classifier needs transformers (TRANSFORMERS_SRC); ORT_MODELING=plain has the backbone only")

    return Plain


def check_reference(transformers, reference_dir):
    """Runs a tests/data/reference directory (weights, inputs.json and transformers 4.40.2's
    expected.safetensors) through the modeling code and returns max |ours - transformers| of the
    last hidden state over the real (unmasked) tokens."""
    import torch
    from safetensors.torch import load_file

    wrapper, _, _ = build_model(transformers, reference_dir, "backbone")
    with open(os.path.join(reference_dir, "inputs.json")) as f:
        inputs = json.load(f)
    ids = torch.tensor(inputs["input_ids"], dtype=torch.int64)
    mask = torch.tensor(inputs["attention_mask"], dtype=torch.int64)
    want = load_file(os.path.join(reference_dir, "expected.safetensors"))["last_hidden_state"]
    with torch.no_grad():
        got = wrapper(ids, mask)[0]
    real = mask.bool()
    return float((got[real] - want[real]).abs().max())


def build_model(transformers, model_dir, head):
    """(module wrapping the model to return a tuple, output names, config)."""
    import torch
    from safetensors.torch import load_file

    with open(os.path.join(model_dir, "config.json")) as f:
        config_dict = json.load(f)
    model_type = config_dict.get("model_type")
    state = load_file(os.path.join(model_dir, "model.safetensors"))
    if any(t.dtype != torch.float32 for t in state.values() if t.is_floating_point()):
        state = {k: (v.float() if v.is_floating_point() else v) for k, v in state.items()}
    dropped = []

    if model_type == "deberta-v2":
        config = transformers.DebertaV2Config.from_json_file(os.path.join(model_dir, "config.json"))
        saved_as_classifier = any(k.startswith("deberta.") for k in state)
        if head == "classifier":
            if not saved_as_classifier:
                die(f"{model_dir} holds no classifier (no deberta.*/classifier.* keys)")
            model = transformers.DebertaV2ForSequenceClassification(config)
        else:
            model = transformers.DebertaV2Model(config)
            if saved_as_classifier:
                dropped = sorted(k for k in state if not k.startswith("deberta."))
                state = {k[len("deberta."):]: v for k, v in state.items() if k.startswith("deberta.")}
    elif model_type == "t5":
        if head == "classifier":
            die("--head classifier is for DeBERTa-v2 directories")
        config = transformers.T5Config.from_json_file(os.path.join(model_dir, "config.json"))
        model = transformers.T5EncoderModel(config)
        # Real T5 checkpoints often hold only shared.weight (tied to encoder.embed_tokens).
        if "encoder.embed_tokens.weight" not in state and "shared.weight" in state:
            state["encoder.embed_tokens.weight"] = state["shared.weight"]
        if "shared.weight" not in state and "encoder.embed_tokens.weight" in state:
            state["shared.weight"] = state["encoder.embed_tokens.weight"]
        decoder = sorted(k for k in state if k.startswith("decoder.") or k == "lm_head.weight")
        dropped += decoder
        state = {k: v for k, v in state.items() if k not in decoder}
    else:
        die(f"{model_dir}: model_type {model_type!r}; this export knows deberta-v2 and t5")

    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    print(f"load_state_dict: {len(state)} tensors, missing keys {missing}, unexpected keys {unexpected}"
          + (f", left out (head/decoder): {dropped}" if dropped else ""), file=sys.stderr)
    if missing or unexpected:
        die("the weights do not match the transformers model (strict load)")
    model.load_state_dict(state, strict=True)
    model.eval()

    class Wrapper(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask):
            if getattr(transformers, "plain", False):
                return (self.inner(input_ids, attention_mask),)
            if head == "classifier":
                out = self.inner(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True,
                                 return_dict=True)
                return out.hidden_states[-1], out.logits
            out = self.inner(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
            return (out.last_hidden_state,)

    outputs = ["last_hidden_state", "logits"] if head == "classifier" else ["last_hidden_state"]
    return Wrapper(model).eval(), outputs, config


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="relserve-model directory (config.json, model.safetensors)")
    parser.add_argument("--out", required=True, help="the .onnx file to write")
    parser.add_argument("--head", choices=["backbone", "classifier"], default="backbone")
    parser.add_argument("--threads", type=int, default=int(os.environ.get("THREADS", "2")))
    parser.add_argument("--modeling", choices=["transformers", "plain"], default=os.environ.get("ORT_MODELING", "transformers"),
                        help="transformers: TRANSFORMERS_SRC's modeling code; plain: scripts/ort/plain_modeling.py")
    parser.add_argument("--check-reference", nargs="*", default=[], metavar="DIR",
                        help="before exporting, run these tests/data/reference directories and fail above 1e-4 "
                             "(max |modeling - transformers 4.40.2's expected.safetensors|)")
    args = parser.parse_args()

    transformers = import_plain_modeling() if args.modeling == "plain" else import_transformers()
    for reference in args.check_reference:
        diff = check_reference(transformers, reference)
        print(f"reference {reference}: max |{args.modeling} - transformers 4.40.2| = {diff:.3g}", file=sys.stderr)
        if not diff <= 1e-4:
            die(f"{reference}: the {args.modeling} modeling code differs from transformers' answers by {diff:.3g}")
    import warnings

    import onnx
    import torch

    # torch 1.13's exporter warns about its own deprecated internals on every op, and the tracer about
    # Python values taken from tensor sizes; the check batch (another shape than the trace) is what
    # shows whether a size was frozen into the graph.
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    wrapper, output_names, config = build_model(transformers, args.model, args.head)
    vocab = config.vocab_size

    # Traced on one shape; the check batch below has another, so a size frozen into the graph shows up.
    trace_ids = torch.randint(5, vocab, (2, 16), dtype=torch.int64)
    trace_mask = torch.ones_like(trace_ids)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    dynamic = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}
    for name in output_names:
        dynamic[name] = {0: "batch", 1: "sequence"} if name == "last_hidden_state" else {0: "batch"}
    start = time.time()
    with torch.no_grad():
        torch.onnx.export(wrapper, (trace_ids, trace_mask), args.out, opset_version=14,
                          input_names=["input_ids", "attention_mask"], output_names=output_names,
                          dynamic_axes=dynamic, do_constant_folding=True)
    onnx.checker.check_model(args.out)
    print(f"exported {args.out} ({os.path.getsize(args.out) / 1e6:.0f} MB, opset 14) in {time.time() - start:.0f} s",
          file=sys.stderr)

    # The check batch: row 0 full length (past the exact-distance windows: DeBERTa position_buckets/2,
    # T5 max_distance), row 1 padded after 37 tokens.
    length = 300
    ids = torch.randint(5, vocab, (2, length), dtype=torch.int64)
    mask = torch.ones_like(ids)
    mask[1, 37:] = 0
    ids[1, 37:] = config.pad_token_id or 0
    with torch.no_grad():
        expected = wrapper(ids, mask)
    check = {
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "input_ids": ids.tolist(),
        "attention_mask": mask.tolist(),
        "outputs": {name: {"dims": list(t.shape), "data": t.flatten().tolist()}
                    for name, t in zip(output_names, expected)},
    }
    with open(args.out + ".check.json", "w") as f:
        json.dump(check, f)
    print(json.dumps({"onnx": args.out, "model": args.model, "head": args.head, "outputs": output_names,
                      "transformers": transformers.__version__, "torch": torch.__version__,
                      "onnx_version": onnx.__version__, "check": args.out + ".check.json"}))


if __name__ == "__main__":
    main()

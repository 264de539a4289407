"""Make a tiny Qwen2-style chat model, locally, for serving with the real vLLM in tests.

Run with the Python that has vLLM (it brings torch, transformers, tokenizers)::

    python tests/models/tiny_model.py OUT_DIR

What it makes, and why:

- a byte-level BPE tokenizer trained here on this repository's own source and
  docs (nothing downloaded), with ``<|im_start|>``, ``<|im_end|>``,
  ``<tool_call>`` and ``</tool_call>`` as special tokens;
- a Qwen2 config a few MB in size, weights drawn at random (seeded);
- a chat template with tools in the Qwen/Hermes style, so vLLM's ``hermes``
  tool-call parser applies.

One deliberate change to the random weights: the final norm's weight is zero,
so every logit is exactly 0 and greedy decoding picks the allowed token with
the lowest id.  The vocabulary is ordered so that token 0 is ``<|im_end|>``,
1 is ``"`` and 2 is ``}``: under vLLM's structured output for a named tool
choice the model therefore writes the shortest schema-valid arguments (empty
strings, optional fields left out) and then stops, and in free text it stops
at once.  Tests get fast, deterministic, schema-valid tool calls from a real
vLLM without a trained model.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SPECIALS = ["<|im_end|>", "<|endoftext|>", "<|im_start|>", "<tool_call>", "</tool_call>"]
FIRST = ["<|im_end|>", '"', "}"]  # ids 0, 1, 2: see the module docstring

CHAT_TEMPLATE = """\
{%- if tools %}<|im_start|>system
{%- if messages and messages[0].role == 'system' %}
{{ messages[0].content }}
{%- endif %}

# Tools
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools>
For each function call, return a json object with function name and arguments within <tool_call></tool_call> tags.<|im_end|>
{%- elif messages and messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{%- endif %}
{%- for m in messages %}
{%- if m.role == 'user' %}
<|im_start|>user
{{ m.content }}<|im_end|>
{%- elif m.role == 'assistant' %}
<|im_start|>assistant
{{ m.content or '' }}
{%- for tc in (m.tool_calls or []) %}
<tool_call>
{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments if tc.function.arguments is string else (tc.function.arguments | tojson) }}}
</tool_call>
{%- endfor %}<|im_end|>
{%- elif m.role == 'tool' %}
<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
<|im_start|>assistant
{% endif %}"""


def corpus(root: Path) -> list[str]:
    texts = []
    for pattern in ("**/*.py", "**/*.md"):
        for p in sorted(root.glob(pattern)):
            if ".venv" in p.parts or "node_modules" in p.parts:
                continue
            try:
                texts.append(p.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                continue
    return texts


def make_tokenizer(texts: list[str]) -> str:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1024, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer)
    raw = json.loads(tok.to_str())
    # Reorder ids so the tokens in FIRST come first (see the module docstring).
    vocab: dict[str, int] = raw["model"]["vocab"]
    order = FIRST + [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1]) if t not in FIRST]
    new_ids = {t: i for i, t in enumerate(order)}
    raw["model"]["vocab"] = new_ids
    for added in raw["added_tokens"]:
        added["id"] = new_ids[added["content"]]
    return json.dumps(raw)


def main(out: Path) -> None:
    import torch
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    root = Path(__file__).resolve().parents[2]
    tok_json = make_tokenizer(corpus(root))
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(tok_json),
                                        eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        bos_token=None, unk_token=None, model_max_length=8192)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out)

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=128, intermediate_size=256,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         head_dim=64, max_position_embeddings=8192, tie_word_embeddings=False,
                         eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
                         pad_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
                         bos_token_id=None, torch_dtype="float32")
    model = Qwen2ForCausalLM(config)
    with torch.no_grad():
        model.model.norm.weight.zero_()
    model.save_pretrained(out, safe_serialization=True)
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")
    assert tokenizer.convert_tokens_to_ids(FIRST) == [0, 1, 2]


if __name__ == "__main__":
    main(Path(sys.argv[1]))

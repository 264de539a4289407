"""Re-wire the tests' tiny model so real vLLM passes the installer's health gate.

Run with the Python that has vLLM (torch, safetensors, tokenizers)::

    python tests/installer/wired_model.py TINY_MODEL_DIR OUT_DIR

The tiny model (tests/models/tiny_model.py) has random weights and a zeroed
final norm: every logit is 0, so greedy decoding stops at once in free text.
That cannot answer the gate's known-answer prompt, nor make a tool call whose
result the gate can check.  This copy is wired by hand into a bigram machine
(the next token depends only on the current one), with no training:

* every layer's attention and MLP output projections are zero, so the residual
  stream at each position is just the current token's embedding;
* tokens that end in a newline (the prompt's ``<|im_start|>assistant\\n``)
  embed along one direction, tokens that end in ``"`` along another, all others
  are zero; the final norm is ones;
* ``lm_head`` maps the first direction to ``5`` and the second to ``*``.

So at temperature 0: in free text the model says ``5`` and stops (the known
answer; token 0 is ``<|im_end|>``); under a named tool choice for ``glob``,
vLLM's structured output forces ``{"pattern":"`` and the model writes ``*``,
then the lowest-id allowed tokens close the string and the object.  The tool
call ``glob {"pattern": "*"}`` really runs and lists the gate's probe file.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path


def main(src: Path, dst: Path) -> None:
    import torch
    from safetensors.torch import load_file, save_file
    from tokenizers import Tokenizer

    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".complete"))
    config = json.loads((src / "config.json").read_text())
    hidden = int(config["hidden_size"])
    tok = Tokenizer.from_file(str(src / "tokenizer.json"))
    w = load_file(str(src / "model.safetensors"))
    for name, t in w.items():
        if name.endswith(("self_attn.o_proj.weight", "mlp.down_proj.weight")):
            w[name] = torch.zeros_like(t)
    w["model.norm.weight"] = torch.ones_like(w["model.norm.weight"])
    vocab = w["model.embed_tokens.weight"].shape[0]
    embed = torch.zeros_like(w["model.embed_tokens.weight"])
    for i in range(vocab):
        text = tok.decode([i], skip_special_tokens=False)
        if text.endswith("\n"):
            embed[i, 0] = 1.0
        elif text.endswith('"'):
            embed[i, 1] = 1.0
    w["model.embed_tokens.weight"] = embed
    head = torch.zeros((vocab, hidden), dtype=embed.dtype)
    five, star = tok.token_to_id("5"), tok.token_to_id("*")
    if five is None or star is None:
        raise SystemExit("the tiny tokenizer has no single token for '5' or '*'")
    head[five, 0] = 10.0
    head[star, 1] = 10.0
    w["lm_head.weight"] = head
    save_file({k: v.contiguous() for k, v in w.items()}, str(dst / "model.safetensors"),
              metadata={"format": "pt"})


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))

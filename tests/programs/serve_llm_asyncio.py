"""A language-model server on asyncio with no warm-up: a tiny random Llama (transformers,
built from a config, no download), its forward compiled with ``aot_eager``, behind a
minimal HTTP/1.1 server made with ``asyncio.start_server``. ``GET /N`` runs the forward on a
prompt of N tokens and answers its next token: the first request compiles, a second length
recompiles (the doctor's finding: compiles after ready). Nothing in it knows of compiletrace;
``--ready port:PORT`` says when it is ready.

    python serve_llm_asyncio.py PORT [PID_FILE|-]
"""

import asyncio
import json
import os
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def build() -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval()


MODEL = build()
FORWARD = torch.compile(MODEL.forward, backend="aot_eager")


def next_token(tokens: int) -> int:
    ids = torch.randint(0, 64, (1, tokens))
    with torch.no_grad():
        logits = FORWARD(input_ids=ids, use_cache=False).logits
    return int(logits[0, -1].argmax())


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    request = await reader.readline()
    while (await reader.readline()) not in (b"\r\n", b"\n", b""):
        pass  # the headers: nothing in them is needed
    try:
        tokens = int(request.split()[1].strip(b"/"))
        body, status = json.dumps({"tokens": tokens, "next": next_token(tokens)}).encode(), b"200 OK"
    except (IndexError, ValueError, RuntimeError) as exc:
        body, status = str(exc).encode(), b"500 Internal Server Error"
    head = b"HTTP/1.1 %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (status, len(body))
    writer.write(head + body)
    await writer.drain()
    writer.close()


async def serve(port: int) -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", port)
    print(f"serving on {port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[2] != "-":
        with open(sys.argv[2], "a") as f:
            f.write(f"{os.getpid()}\n")
    asyncio.run(serve(int(sys.argv[1])))

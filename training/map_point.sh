#!/usr/bin/env bash
# One point of docs/training-map.md: train a direction's recipe with extra flags on the unseen-words corpus, choose
# the decoding on dev, then score the test split, its "others" (test_far) and the unseen-words split.
#   bash training/map_point.sh NAME en-ja|ja-en [train.py flags ...]   (CORPUS_DIR defaults to runs/unseen/corpus)
set -euo pipefail
if [[ $# -lt 2 || ! ${2:-} =~ ^(en-ja|ja-en)$ ]]; then
  echo "map_point.sh: pass a point's name and its direction (en-ja or ja-en), then train.py's flags" >&2
  exit 2
fi
name=$1 direction=$2; shift 2
corpus=${CORPUS_DIR:-runs/unseen/corpus}
out=runs/map/$name source=${direction%-*} target=${direction#*-}
py=${PY:-.venv/bin/python}
TRAIN_PRELOAD=$("$py" -c "import ctypes.util as u; print(u.find_library('tcmalloc_minimal') or '')")
${TRAIN_PRELOAD:+env LD_PRELOAD=$TRAIN_PRELOAD} "$py" training/train.py "training/recipes/$direction.json" --corpus_dir "$corpus" --output_dir "$out" "$@"
"$py" training/tune_decoding.py --model "$out/hub" --corpus_dir "$corpus" --source_lang "$source" --target_lang "$target"
for split in test test_far unseen; do
  "$py" training/evaluate_model.py --model "$out/hub" --corpus_dir "$corpus" --split "$split" \
    --source_lang "$source" --target_lang "$target" --output_file "$out/$split.hyp" | tee "$out/$split.score"
done

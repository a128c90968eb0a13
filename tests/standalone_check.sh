#!/bin/sh
# The repository stands alone: no tracked file points outside it. Fails when
# a tracked file (other than the third-party test data under tests/data/ and
# the figures) names a path in a sibling folder or one of the design notes
# the project's own docs/ replaced. Usage: standalone_check.sh SOURCE_DIR.
# Exit 0: clean; 1: references found (listed); 77: skipped (not a git
# checkout, or no git), which CTest reports as skipped.
src=${1:-.}

if ! command -v git >/dev/null 2>&1; then
  echo "standalone check skipped: git is not installed"
  exit 77
fi
if ! git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "standalone check skipped: $src is not a git checkout"
  exit 77
fi

# Written with character classes so that this file does not match itself.
pattern='[.][.]/shared|shared/(design|seeds|peer)|SHARED[_]DIR|EQUATIONS[.]md|INTERFACES[.]md|STYLE[.]md|ARCHITECTURE[.]md'

cd "$src" || exit 1
found=$(git ls-files -z -- . ':(exclude)tests/data/**' ':(exclude)*.png' |
        xargs -0 -r grep -I -n -E "$pattern" -- 2>/dev/null)
if [ -n "$found" ]; then
  echo "References to paths outside the repository (use docs/equations.md, docs/formats.md,"
  echo "docs/architecture.md, docs/style.md and tests/data/ instead):"
  echo "$found"
  exit 1
fi
echo "standalone check: $(git ls-files | wc -l) tracked files, none refers outside the repository"

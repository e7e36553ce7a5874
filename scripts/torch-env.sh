# Source me (bash): exports what tch/torch-sys need to build against the venv's libtorch.
# The binaries carry an rpath to that libtorch, so running them needs none of this.
_tnt_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export VIRTUAL_ENV="$_tnt_root/.venv"
export PATH="$VIRTUAL_ENV/bin:$PATH"
export LIBTORCH_USE_PYTORCH=1
unset _tnt_root

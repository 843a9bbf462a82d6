# Shared by the .ci scripts (sourced, not run): each decision the scripts share is made here once.
# Callers set CI_NAME (the prefix of their lines) before using ci_elapsed.

# ci_install PACKAGE...: installs those of Debian's packages that are missing (apt-get, as root or
# through sudo).
ci_install() {
  missing=""
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
  done
  [ -n "$missing" ] || return 0
  echo "installing:$missing"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q $missing
}

# ci_build DIR TARGET...: builds with every core, holding KGROUP_BUILD_LOCK (a file to flock, for
# machines that run several builds) when it is set.
ci_build() {
  dir=$1
  shift
  if [ -n "${KGROUP_BUILD_LOCK:-}" ]; then
    flock "$KGROUP_BUILD_LOCK" cmake --build "$dir" -j "$(nproc)" --target "$@"
  else
    cmake --build "$dir" -j "$(nproc)" --target "$@"
  fi
}

# Parallel test processes: twice the cores (the integration cases mostly wait on timers).
KGROUP_TEST_JOBS=${KGROUP_TEST_JOBS:-$((2 * $(nproc)))}
export KGROUP_TEST_JOBS

# What is expensive to rebuild lives outside the source tree (test/CMakeLists.txt follows the
# same rule to find the second test cluster).
KGROUP_CACHE_DIR=${KGROUP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kgroup}
export KGROUP_CACHE_DIR

# ci_elapsed WHAT: prints how long the phase since the last call took, and the total.
ci_start=$(date +%s)
ci_phase=$ci_start
ci_elapsed() {
  now=$(date +%s)
  echo "$CI_NAME: $1 took $((now - ci_phase)) s (total $((now - ci_start)) s)"
  ci_phase=$now
}

#!/bin/sh
# Generates the API reference (Doxygen over the public headers, docs/Doxyfile) into BUILD_DIR/api
# and fails if Doxygen warns: an undocumented public declaration, a \param naming no parameter, a
# broken reference. Every warning is listed as file:line: text. The ctest entry api_reference
# (label docs) runs it.
#
# The inputs are include/kgroup, the headers CMake generates into BUILD_DIR/include/kgroup
# (version.hpp; export.hpp is GenerateExportHeader's and only defines KGROUP_EXPORT, which
# docs/Doxyfile expands to nothing) and two guides, docs/api-reference.md (the main page) and
# docs/errors.md. Nothing is written into the source tree.
#
# Usage: api_reference.sh SOURCE_DIR BUILD_DIR
# Environment: DOXYGEN (the doxygen to run, default doxygen from PATH).
set -eu
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
doxygen=${DOXYGEN:-doxygen}
if ! command -v "$doxygen" >/dev/null 2>&1; then
  echo "api_reference: $doxygen not found; install it (Debian: apt-get install doxygen; .ci/deps does)" >&2
  exit 1
fi
version_hpp=$build/include/kgroup/version.hpp
if [ ! -f "$version_hpp" ]; then
  echo "api_reference: $version_hpp is missing; configure the build directory with CMake first" >&2
  exit 1
fi
version=$(sed -n 's/^#define KGROUP_VERSION_STRING "\(.*\)"$/\1/p' "$version_hpp")
out=$build/api
rm -rf "$out"
mkdir -p "$out"
cd "$src"
rc=0
{
  cat docs/Doxyfile
  echo "INPUT = \"$src/include/kgroup\" \"$version_hpp\" \"$src/docs/api-reference.md\" \"$src/docs/errors.md\""
  echo "USE_MDFILE_AS_MAINPAGE = \"$src/docs/api-reference.md\""
  echo "STRIP_FROM_PATH = \"$src/include\" \"$build/include\" \"$src\""
  echo "STRIP_FROM_INC_PATH = \"$src/include\" \"$build/include\""
  echo "OUTPUT_DIRECTORY = \"$out\""
  echo "WARN_LOGFILE = \"$out/warnings.txt\""
  echo "PROJECT_NUMBER = \"$version\""
} | "$doxygen" - >"$out/doxygen.log" 2>&1 || rc=$?
if [ -s "$out/warnings.txt" ]; then
  cat "$out/warnings.txt" >&2
  echo "api_reference: $(grep -c ': warning: \|: error: ' "$out/warnings.txt" || true) Doxygen warnings" \
    "($(grep -c 'is not documented' "$out/warnings.txt" || true) undocumented declarations) above;" \
    "document them in the headers (see docs/Doxyfile)" >&2
  exit 1
fi
if [ "$rc" != 0 ] || [ ! -f "$out/html/index.html" ]; then
  cat "$out/doxygen.log" >&2
  echo "api_reference: doxygen failed (exit status $rc)" >&2
  exit 1
fi
echo "api_reference: $out/html/index.html (kgroup $version), no warnings"

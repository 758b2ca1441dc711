#!/usr/bin/env bash
# Installs the build into a temporary prefix and uses only what was
# installed: the exported symbols and SONAME of libsluice.so, the examples
# built with find_package(sluice) (shared and static) and with pkg-config,
# and the Python binding's tests through the installed module.
#
# usage: install_test.sh BUILD_DIR SOURCE_DIR WORK_DIR
# Exits 0 on success, 1 on failure.
set -uo pipefail
BUILD=$1 SRC=$2 WORK=$3
MODEL=$SRC/models/sluice-mini
PREFIX=$WORK/prefix
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

rm -rf "$WORK" && mkdir -p "$WORK"
if ! cmake --install "$BUILD" --prefix "$PREFIX" >"$WORK/install.log" 2>&1; then
  cat "$WORK/install.log"; echo "FAIL cmake --install"; exit 1
fi
ok "cmake --install into a temporary prefix"
LIBDIR=$(dirname "$(find "$PREFIX" -name 'libsluice.so.0' | head -1)")
for f in "$LIBDIR/libsluice.a" "$LIBDIR/pkgconfig/sluice.pc" "$LIBDIR/cmake/sluice/sluiceConfig.cmake" \
         "$PREFIX/include/sluice/sluice.h" "$PREFIX/bin/sluice" "$PREFIX/share/sluice/python/sluice.py"; do
  [ -f "$f" ] && ok "installed ${f#$PREFIX/}" || bad "missing ${f#$PREFIX/}"
done

# Only the C API leaves the shared library; its SONAME carries the ABI version.
SO=$LIBDIR/libsluice.so.0
soname=$(readelf -d "$SO" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = libsluice.so.0 ] && ok "SONAME $soname" || bad "SONAME is '$soname', expected libsluice.so.0"
nm -D --defined-only "$SO" | awk '{print $NF}' | sort -u >"$WORK/exports.txt"
n_all=$(wc -l <"$WORK/exports.txt")
n_api=$(grep -c '^sluice_' "$WORK/exports.txt")
n_hdr=$(grep -o 'SLUICE_API [^(]*(' "$PREFIX/include/sluice/sluice.h" | grep -o 'sluice_[a-z0-9_]*($' | tr -d '(' | sort -u | tee "$WORK/header.txt" | wc -l)
echo "     exported symbols: $n_all ($n_api sluice_*); functions in the header: $n_hdr"
[ "$n_all" -eq "$n_api" ] && ok "nm -D: only sluice_* symbols exported" || { bad "nm -D: non-API symbols exported:"; grep -v '^sluice_' "$WORK/exports.txt" | head; }
missing=$(comm -23 "$WORK/header.txt" "$WORK/exports.txt")
[ -z "$missing" ] && ok "every header function is exported" || bad "declared but not exported: $missing"

# The examples, built with find_package(sluice) against the prefix only.
if cmake -S "$SRC/examples" -B "$WORK/examples" -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_BUILD_TYPE=Release \
     >"$WORK/examples-configure.log" 2>&1 &&
   cmake --build "$WORK/examples" -j 2 >"$WORK/examples-build.log" 2>&1; then
  ok "examples built with find_package(sluice)"
else
  cat "$WORK/examples-configure.log" "$WORK/examples-build.log" | tail -30; bad "examples did not build"
fi
deps=$(ldd "$WORK/examples/generate"); deps_static=$(ldd "$WORK/examples/generate_static")
case "$deps" in *"$LIBDIR/libsluice.so.0"*) ok "generate links the installed libsluice.so.0";;
  *) bad "generate does not link the installed library: $deps";; esac
case "$deps_static" in *libsluice*) bad "generate_static needs libsluice.so";;
  *) ok "generate_static is linked statically against libsluice.a";; esac

out=$("$WORK/examples/generate" "$MODEL" "And God said" 24); rc=$?
echo "     generate: $out"
[ $rc -eq 0 ] && [ -n "$out" ] && ok "C example streams text (exit 0)" || bad "C example: exit $rc, output '$out'"
out_s=$("$WORK/examples/generate_static" "$MODEL" "And God said" 24)
[ "$out" = "$out_s" ] && ok "static build prints the same text" || bad "static build differs: '$out_s'"
err=$("$WORK/examples/generate" "$WORK/no-such-model" "x" 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] && echo "$err" | grep -q "no-such-model" && ok "C example: a missing model exits 1 naming it" \
  || bad "C example on a missing model: exit $rc, '$err'"
sess=$("$WORK/examples/session" "$MODEL" "$WORK/state.bin"); rc=$?
echo "     $sess"
[ $rc -eq 0 ] && echo "$sess" | grep -q "bit-identical" && ok "C++ example: restored session is bit-identical" \
  || bad "C++ session example: exit $rc"

# pkg-config.
if command -v pkg-config >/dev/null; then
  flags=$(PKG_CONFIG_PATH=$LIBDIR/pkgconfig pkg-config --cflags --libs sluice)
  if cc -O2 "$SRC/examples/generate.c" $flags -o "$WORK/generate_pc" 2>"$WORK/pc.log"; then
    out_pc=$(LD_LIBRARY_PATH=$LIBDIR "$WORK/generate_pc" "$MODEL" "And God said" 24)
    [ "$out_pc" = "$out" ] && ok "pkg-config build ($flags) prints the same text" || bad "pkg-config build differs"
  else
    cat "$WORK/pc.log"; bad "pkg-config build failed"
  fi
else
  echo "skip pkg-config build: pkg-config is not installed"
fi

# The Python binding, imported from the prefix (it finds PREFIX/lib itself).
if PYTHONPATH=$PREFIX/share/sluice/python SLUICE_PY_INSTALLED=1 SLUICE_TEST_MODEL=$MODEL \
   /usr/bin/python3 -m unittest discover -s "$SRC/python/tests" -v >"$WORK/python.log" 2>&1; then
  ok "python binding tests against the installed module ($(grep '^Ran ' "$WORK/python.log"))"
else
  cat "$WORK/python.log"; bad "python binding tests"
fi
loc=$(cd "$WORK" && PYTHONPATH=$PREFIX/share/sluice/python /usr/bin/python3 -c 'import sluice; sluice.load_library(); print(sluice._lib._name)')
case "$loc" in "$PREFIX"*) ok "the installed module loads the installed library ($loc)";; *) bad "module loaded '$loc'";; esac

echo "$fails failure(s)"
[ $fails -eq 0 ]

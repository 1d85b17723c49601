# Sourced by the tests that build and run 32-bit (gcc -m32) programs: m32-suites.sh,
# real-preload-world.sh. Linking is not enough: a kernel built without IA-32 emulation (or
# booted with ia32_emulation=0) links nothing less, then refuses to execute the result
# ("Exec format error", status 126).
#
# m32_probe DIR: sets M32_WHY to why 32-bit programs cannot be built and run here, empty
# when they can; M32_KIND to "toolchain" (cannot build: fatal under THPALLOC_REQUIRE_M32=1)
# or "kernel" (builds, cannot run: always a skip, the machine lacks the capability).
# THPALLOC_TEST_EXEC32 (tests only): a command that runs the probe in place of the kernel,
# e.g. tests/m32-enoexec, which answers as a kernel without IA-32 emulation does.
m32_probe() {
    M32_WHY= M32_KIND=
    if ! echo 'int main(void){return 0;}' | ${CC:-gcc} -m32 -x c - -o "$1/m32-probe" 2>/dev/null; then
        M32_WHY="${CC:-gcc} -m32 cannot link (apt-get install gcc-multilib)"
        M32_KIND=toolchain
        return 0
    fi
    # The shell's own message ("cannot execute binary file: Exec format error") says why.
    _m32_msg=$(${THPALLOC_TEST_EXEC32:-} "$1/m32-probe" 2>&1)
    _m32_rc=$?
    if [ "$_m32_rc" -ne 0 ]; then
        M32_WHY="this kernel does not run 32-bit programs (exit $_m32_rc: ${_m32_msg:-no message}; IA-32 emulation off)"
        M32_KIND=kernel
    fi
    return 0
}

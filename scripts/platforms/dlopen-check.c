/*
 * Loads a shared object the way Node loads an addon (dlopen with RTLD_NOW: every undefined
 * symbol resolved, constructors run) and looks up the addon's entry. Built by
 * scripts/platforms/test.mjs with zig for a musl target and run under musl's own dynamic
 * loader (Debian's musl package): the check that a musl `.node` loads, where no musl Node is
 * at hand. Usage: dlopen-check FILE.node
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s FILE\n", argv[0]);
        return 2;
    }
    void *handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    if (!dlsym(handle, "napi_register_module_v1")) {
        fprintf(stderr, "dlsym napi_register_module_v1: %s\n", dlerror());
        return 1;
    }
    printf("loaded, napi_register_module_v1 found\n");
    return 0;
}

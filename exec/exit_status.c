/* exit_status: hands main's status to the finalize guard (exec/finalize_guard.c) before
 * MPI_Finalize, since a guard that fires exits without returning to main. The guard is a
 * preloaded shared object, so its function is in the dynamic symbol table and dlsym finds
 * it; the program links nothing of it, and without the preload the lookup finds nothing. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "exit_status.h"

#include <dlfcn.h>
#include <stddef.h>

void dtx_declare_exit_status(int status)
{
    void (*declare)(int);
    /* POSIX's way to turn dlsym's object pointer into a function pointer */
    *(void **)&declare = dlsym(RTLD_DEFAULT, "finalize_guard_declare_status");
    if (declare != NULL)
        declare(status);
}

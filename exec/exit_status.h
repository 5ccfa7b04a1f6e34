/* exit_status: a rank's exit status declared before MPI_Finalize, for the finalize guard. */
#ifndef DTX_EXIT_STATUS_H
#define DTX_EXIT_STATUS_H

/* Tells exec/finalize_guard.so, when it is preloaded, the status main returns after
 * MPI_Finalize: if MPI_Finalize then hangs, the guard exits with it (not 0). Call it
 * right before MPI_Finalize; without the guard it does nothing. */
void dtx_declare_exit_status(int status);

#endif

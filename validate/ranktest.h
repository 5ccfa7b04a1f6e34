/* The exact two-sided Mann-Whitney U test (Wilcoxon rank-sum), for deciding whether two
 * strategies' repeated runs tell their order apart. Rank-based, so one run that landed in a
 * slow mode of the machine moves it by one rank, not by its size. */
#ifndef DTV_RANKTEST_H
#define DTV_RANKTEST_H

/* U of sample a against b: pairs (a_i, b_j) with a_i < b_j, ties counting one half. */
double dtv_mwu_u(const double *a, int na, const double *b, int nb);

/* Two-sided p-value of U for sample sizes na, nb (1..64 each) under the null hypothesis that
 * both come from one continuous distribution: 2 P(U' <= min(U, na nb - U)), at most 1, from
 * the exact distribution of U (counted by recursion, no normal approximation). Ties are
 * rounded towards the centre, which errs on the side of "not resolved". NaN for bad sizes. */
double dtv_mwu_p_two_sided(double u, int na, int nb);

#endif

/* params_diff A B TOL: compares two raw float32 files (dtexec --dump-params) element by
 * element. Prints the largest absolute difference and where it is; exits 0 when the files
 * have the same length and every |a - b| <= TOL, 1 otherwise, 2 on a usage or read error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static float *slurp(const char *path, long *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    long cap = 1024, len = 0;
    float *v = malloc((size_t)cap * sizeof *v);
    size_t got;
    while (v && (got = fread(v + len, sizeof *v, (size_t)(cap - len), f)) > 0) {
        len += (long)got;
        if (len == cap) {
            cap *= 2;
            float *w = realloc(v, (size_t)cap * sizeof *v);
            if (!w) {
                free(v);
                v = NULL;
            }
            v = w;
        }
    }
    fclose(f);
    *n = len;
    return v;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s A B TOL\n", argv[0]);
        return 2;
    }
    char *end;
    double tol = strtod(argv[3], &end);
    if (*end || !(tol >= 0)) {
        fprintf(stderr, "%s: bad tolerance '%s'\n", argv[0], argv[3]);
        return 2;
    }
    long na, nb;
    float *a = slurp(argv[1], &na), *b = slurp(argv[2], &nb);
    if (!a || !b)
        return 2;
    if (na != nb || na == 0) {
        printf("lengths differ or empty: %ld and %ld floats\n", na, nb);
        return 1;
    }
    double worst = 0;
    long at = 0;
    for (long i = 0; i < na; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= worst)) { /* NaN counts as the worst */
            worst = isnan(d) ? INFINITY : d;
            at = i;
        }
    }
    printf("%ld floats, max |a-b| = %.3g at %ld (%.9g vs %.9g), tolerance %.3g\n", na, worst, at,
           a[at], b[at], tol);
    free(a);
    free(b);
    return worst <= tol ? 0 : 1;
}

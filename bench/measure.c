/* Runs a command and prints what it used, and only it: wall seconds, CPU seconds (user + system) and peak RSS
 * in KiB, from wait4's rusage, on one line to standard error; then exits with the command's status.
 *
 * Why not GNU time: its %U and %S round to 10 ms, and taking CPU from the caller's RUSAGE_CHILDREN instead
 * adds time's own start-up (0.9 ms a run) to each command. Why not wait4 from Python: a child's ru_maxrss
 * starts at the RSS of the process that forked it (the kernel keeps the high-water mark across exec), so
 * each command would show Python's 20-odd MiB. This process is small, so its child's floor is too.
 * Apache License 2.0. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: measure COMMAND [ARGUMENT...]\n");
        return 2;
    }
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    pid_t child = fork();
    if (child < 0) {
        perror("measure: fork");
        return 2;
    }
    if (child == 0) {
        execvp(argv[1], argv + 1);
        perror(argv[1]);
        _exit(127);
    }
    int status = 0;
    struct rusage usage;
    while (wait4(child, &status, 0, &usage) < 0) {}
    clock_gettime(CLOCK_MONOTONIC, &end);
    double wall = (end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9;
    double cpu = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
    fprintf(stderr, "measure: %.6f %.6f %ld\n", wall, cpu, usage.ru_maxrss);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/*
 * exitstatus.so: a preload library for the Wine processes of winproc's Linux
 * emulation (shim/emulation). It records the status a process passes to
 * exit() or _exit() on a pipe the emulation hands it, before anything else of
 * the exit runs.
 *
 * Why: the kernel keeps only the low 8 bits of an exit status, and exit()
 * gets a Windows exit code whole (Wine turns a code whose low byte is 0 into
 * 1 first). And Wine's ntdll closes a process's wineserver connection on its
 * way out; the wineserver SIGKILLs a process still alive half a second
 * later, so one whose exit() handlers hang dies of the kill. The record
 * keeps its code. (A process that stalls before calling exit() records
 * nothing: shim/emulation doc.go.)
 *
 * The emulation sets WINPROC_EXIT_FD=FD:DEV:INO:PPID: the descriptor and
 * identity of the pipe's write end, and its own pid. The library acts only in
 * the process the emulation started (its parent is PPID; a process Wine forks
 * on the way has another), in Wine's final process image (after the loader's
 * re-exec, marked by WINELOADERNOEXEC), and only if the descriptor is still
 * that pipe. It then removes itself and the variable from the environment, so
 * the Windows program does not see them and the processes it creates do not
 * record.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int record_fd = -1;
static unsigned long long record_dev, record_ino;
static pid_t record_pid; /* a child forked by the process inherits record_fd */

/* drop_preload removes this library from the colon- or
 * space-separated list in LD_PRELOAD. */
static void drop_preload(void)
{
    const char *list = getenv("LD_PRELOAD");
    Dl_info info;
    if (!list || !dladdr((void *)drop_preload, &info) || !info.dli_fname) return;
    char *copy = strdup(list), *out = calloc(1, strlen(list) + 1), *save = NULL;
    if (!copy || !out) { free(copy); free(out); return; }
    for (char *tok = strtok_r(copy, ": ", &save); tok; tok = strtok_r(NULL, ": ", &save)) {
        if (strcmp(tok, info.dli_fname) == 0) continue;
        if (*out) strcat(out, ":");
        strcat(out, tok);
    }
    if (*out) setenv("LD_PRELOAD", out, 1);
    else unsetenv("LD_PRELOAD");
    free(copy);
    free(out);
}

__attribute__((constructor)) static void init(void)
{
    const char *v = getenv("WINPROC_EXIT_FD");
    if (!v || !getenv("WINELOADERNOEXEC")) return;
    int fd;
    long ppid;
    unsigned long long dev, ino;
    struct stat st;
    if (sscanf(v, "%d:%llu:%llu:%ld", &fd, &dev, &ino, &ppid) == 4 && (long)getppid() == ppid &&
        fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) &&
        (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino) {
        record_fd = fd;
        record_dev = dev;
        record_ino = ino;
        record_pid = getpid();
    }
    unsetenv("WINPROC_EXIT_FD");
    drop_preload();
}

static void record(int status)
{
    struct stat st;
    /* The descriptor must still be the pipe: a program may have closed it
     * and reused its number. */
    if (record_fd < 0 || getpid() != record_pid || fstat(record_fd, &st) != 0 ||
        (unsigned long long)st.st_dev != record_dev || (unsigned long long)st.st_ino != record_ino)
        return;
    char line[48];
    int n = snprintf(line, sizeof line, "%d %d\n", (int)getpid(), status);
    if (n > 0) (void)!write(record_fd, line, (size_t)n);
    record_fd = -1;
}

void exit(int status)
{
    record(status);
    void (*real)(int) = (void (*)(int))dlsym(RTLD_NEXT, "exit");
    real(status);
    __builtin_unreachable();
}

void _exit(int status)
{
    record(status);
    void (*real)(int) = (void (*)(int))dlsym(RTLD_NEXT, "_exit");
    real(status);
    __builtin_unreachable();
}

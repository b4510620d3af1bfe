/*
 * wineexit.so: a preload library for the Wine processes winproc's tests and
 * Linux emulation (shim/emulation) start. It makes their exit reliable and,
 * for the emulation, records the status they pass to exit() whole.
 *
 * The exit race it closes (Wine 8 with glibc 2.36): ExitProcess has the
 * wineserver send SIGQUIT to every other thread, whose handler ends the
 * thread with pthread_exit(). A thread already on its way out through
 * pthread_exit() (one whose Windows thread just ended, say the console
 * control handler's) is not protected from that SIGQUIT:
 *   - glibc's first pthread_exit() in a process dlopen()s libgcc_s for the
 *     unwinder while holding the loader lock. A SIGQUIT there ends the thread
 *     with the lock held, and the exiting thread's exit() waits for the lock
 *     in _dl_fini for ever;
 *   - a SIGQUIT later in the unwinding runs Wine's thread exit a second
 *     time, on a stack that is gone: SIGSEGV.
 * Either way the exit status is lost: the wineserver SIGKILLs a process half
 * a second after it closed its server connection (server/process.c,
 * start_sigkill_timer), or the kernel reports the SIGSEGV. About 1 graceful
 * exit in 80 of a Go program after a console event ended so here. The
 * library loads the unwinder when the process starts, and pthread_exit()
 * blocks asynchronous signals before it unwinds (the thread is ending
 * anyway; Wine's own thread exit blocks the other server signals). Shown by
 * gdb on the stuck threads (both waiting for _rtld_global's lock, one in
 * _dl_fini, one in dlopen("libgcc_s.so.1") under pthread_exit) and by core
 * dumps of the SIGSEGVs.
 *
 * The record: the kernel keeps only the low 8 bits of an exit status, and
 * exit() gets a Windows exit code whole (Wine turns a code whose low byte is
 * 0 into 1 first). The emulation sets WINPROC_EXIT_FD=FD:DEV:INO:PPID: the
 * descriptor and identity of a pipe's write end, and its own pid. The library
 * writes "pid status" there at the entry of exit() or _exit(), before
 * anything else of the exit runs, so a process killed during its exit keeps
 * its code. It records only in the process the emulation started (its parent
 * is PPID; a process Wine forks on the way has another), and only if the
 * descriptor is still that pipe.
 *
 * The library acts in Wine's final process image (after the loader's
 * re-exec, marked by WINELOADERNOEXEC). There it removes itself and its
 * variable from the environment, so the Windows program does not see them;
 * the processes the program creates run without it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The real functions, found when the library loads: dlsym takes the loader
 * lock, which a thread ended by a signal may hold at exit time. */
static void (*real_exit)(int);
static void (*real__exit)(int);
static void (*real_pthread_exit)(void *);

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

static void open_record(const char *v)
{
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
}

__attribute__((constructor)) static void init(void)
{
    real_exit = (void (*)(int))dlsym(RTLD_NEXT, "exit");
    real__exit = (void (*)(int))dlsym(RTLD_NEXT, "_exit");
    real_pthread_exit = (void (*)(void *))dlsym(RTLD_NEXT, "pthread_exit");
    if (!getenv("WINELOADERNOEXEC")) return;
    /* glibc loads its unwinder (libgcc_s) on the first backtrace() or
     * pthread_exit() of a process and keeps it: load it now, while no
     * signal can end a thread inside the loader. */
    void *pc[1];
    (void)backtrace(pc, 1);
    const char *v = getenv("WINPROC_EXIT_FD");
    if (v) open_record(v);
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
    real_exit(status);
    __builtin_unreachable();
}

void _exit(int status)
{
    record(status);
    real__exit(status);
    __builtin_unreachable();
}

void pthread_exit(void *value)
{
    sigset_t set;
    sigfillset(&set);
    /* Faults stay deliverable: blocked, they would kill the process
     * without Wine's handler. */
    sigdelset(&set, SIGSEGV);
    sigdelset(&set, SIGBUS);
    sigdelset(&set, SIGILL);
    sigdelset(&set, SIGFPE);
    sigdelset(&set, SIGTRAP);
    sigdelset(&set, SIGABRT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    real_pthread_exit(value);
    __builtin_unreachable();
}

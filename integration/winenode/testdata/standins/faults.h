/*
 * Faults a test asks the node's stand-ins for, as HCS gives them: the file
 * C:\ProgramData\winproc-standins\faults holds a line per fault,
 *
 *     <function or notification> <kind> <HRESULT in hex> <count>
 *
 * The kinds (standin_fault_kinds; shim/hcs's fake of the binding speaks
 * the same names) of a function's fault:
 *   call   the function itself fails with the HRESULT;
 *   op     its operation completes with the HRESULT;
 *   stall  its operation stays pending until the caller cancels it (then
 *          it completes with HCS_E_OPERATION_TIMEOUT);
 *   deaf   its operation ignores a cancel and completes with the HRESULT
 *          after 5 s;
 *   exit   (a system's function) the system exits during the operation:
 *          the operation completes with the HRESULT, and the system's
 *          exit notification carries it as its Status (HCS's
 *          HCS_E_TERMINATED_DURING_START, 80370100);
 *   gone   (a system's function) the system had stopped without a
 *          notification: the function fails with the HRESULT (HCS's
 *          HCS_E_SYSTEM_NOT_FOUND, 8037010E) and the properties say
 *          Stopped;
 *   spurious (HcsCreateProcess) the process is made and runs, but the
 *          operation completes with the HRESULT, and HcsGetProcessInfo
 *          still hands over its id and pipes: HcsCreateProcess "can
 *          complete synchronously and leave the tracking operation in a
 *          state where the wait spuriously fails (e.g. E_INVALIDARG)",
 *          observed on Windows Server 2022 (hcsshim internal/hcs/v2
 *          system.go createProcess, which recovers so);
 *   hold   (HcsSignalProcess) the event is delivered, but the call's
 *          operation completes (with the HRESULT) only when the process
 *          exits, or, failing it, when cancelled; until the exit, a
 *          signal or terminate of the process through a handle opened
 *          from the same system handle waits behind it: "servercore
 *          images block on signaling and wait until the target process
 *          is terminated" (hcsshim cmd/containerd-shim-runhcs-v1
 *          exec_hcs.go signal, Bug36689012), and "HCS serializes the
 *          signals sent to a target pid per compute system handle"
 *          (hcsshim internal/hcs/v2 process.go Kill).
 * The kinds of a notification's fault, on HcsEventSystemExited or
 * HcsEventProcessExited (computecore.h's HCS_EVENT_TYPE names):
 *   lost   it never comes;
 *   twice  it comes twice, the second time 100 ms after the first and
 *          with the HRESULT as its Status (a system's) or ExitCode (a
 *          process's), if not 0;
 *   late   it comes 300 ms late (after the caller may have closed its
 *          handle).
 * Each use counts down; at 0 the fault is gone. Every process that loads
 * a stand-in shares the file, under a named mutex. A fault of a kind the
 * function cannot take is left for a function that can.
 */
#include <stdio.h>
#include <string.h>

enum {
    FAULT_NONE,
    FAULT_CALL,
    FAULT_OP,
    FAULT_STALL,
    FAULT_DEAF,
    FAULT_EXIT,
    FAULT_GONE,
    FAULT_LOST,
    FAULT_TWICE,
    FAULT_LATE,
    FAULT_SPURIOUS,
    FAULT_HOLD,
    FAULT_KINDS
};

/* The kinds' names, by their enum value. */
static const char *const standin_fault_kinds[FAULT_KINDS] = {"", "call", "op", "stall", "deaf", "exit", "gone", "lost", "twice", "late", "spurious", "hold"};

/* Which kinds a caller of standin_fault can take. */
#define FAULTS_OF_CALL (1u << FAULT_CALL | 1u << FAULT_OP | 1u << FAULT_STALL | 1u << FAULT_DEAF)
#define FAULTS_OF_SYSTEM (FAULTS_OF_CALL | 1u << FAULT_EXIT | 1u << FAULT_GONE)
#define FAULTS_OF_EVENT (1u << FAULT_LOST | 1u << FAULT_TWICE | 1u << FAULT_LATE)
#define FAULTS_OF_CREATE_PROCESS (FAULTS_OF_CALL | 1u << FAULT_SPURIOUS)
#define FAULTS_OF_SIGNAL (FAULTS_OF_CALL | 1u << FAULT_HOLD)

static inline int standin_fault_kind(const char *name)
{
    for (int k = FAULT_CALL; k < FAULT_KINDS; k++)
        if (!strcmp(name, standin_fault_kinds[k]))
            return k;
    return FAULT_NONE;
}

#define STANDIN_FAULTS STANDIN_STATE L"\\faults"

/* standin_fault takes one use of the first fault of function of a kind in
 * kinds (a mask of 1 << FAULT_*), if any, and gives its kind and HRESULT. */
static inline int standin_fault(const char *function, unsigned kinds, HRESULT *hr)
{
    HANDLE mu = CreateMutexW(NULL, FALSE, L"winproc-standins-faults");
    HANDLE f;
    char buf[4096], out[4096], name[128], kind[16];
    DWORD got = 0, n;
    int found = FAULT_NONE, off = 0;
    unsigned long code;
    long count;
    WaitForSingleObject(mu, 10000);
    f = CreateFileW(STANDIN_FAULTS, GENERIC_READ | GENERIC_WRITE, 0, NULL, OPEN_EXISTING, 0, NULL);
    if (f != INVALID_HANDLE_VALUE) {
        ReadFile(f, buf, sizeof(buf) - 1, &got, NULL);
        buf[got] = 0;
        out[0] = 0;
        for (char *line = strtok(buf, "\r\n"); line; line = strtok(NULL, "\r\n")) {
            if (sscanf(line, "%127s %15s %lx %ld", name, kind, &code, &count) != 4)
                continue;
            if (!found && !strcmp(name, function) && count > 0 && (kinds >> standin_fault_kind(kind) & 1) &&
                standin_fault_kind(kind) != FAULT_NONE) {
                found = standin_fault_kind(kind);
                *hr = (HRESULT)code;
                count--;
            }
            if (count > 0)
                off += snprintf(out + off, sizeof(out) - off, "%s %s %lx %ld\n", name, kind, code, count);
        }
        if (found) {
            SetFilePointer(f, 0, NULL, FILE_BEGIN);
            WriteFile(f, out, (DWORD)off, &n, NULL);
            SetEndOfFile(f);
        }
        CloseHandle(f);
    }
    ReleaseMutex(mu);
    CloseHandle(mu);
    return found;
}

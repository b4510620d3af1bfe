/*
 * Faults a test asks the node's stand-ins for, as HCS gives them: the file
 * C:\ProgramData\winproc-standins\faults holds a line per fault,
 *
 *     <function> <call|op|stall> <HRESULT in hex> <count>
 *
 * "call" fails the function itself with the HRESULT, "op" completes its
 * operation with it, "stall" leaves its operation pending until the
 * caller cancels it (then it completes with HCS_E_OPERATION_TIMEOUT).
 * Each use counts down; at 0 the fault is gone. Every process that loads
 * a stand-in shares the file, under a named mutex.
 */
#include <stdio.h>
#include <string.h>

enum { FAULT_NONE, FAULT_CALL, FAULT_OP, FAULT_STALL };

#define STANDIN_FAULTS STANDIN_STATE L"\\faults"

/* standin_fault takes one use of the first fault of function, if any, and
 * gives its kind and HRESULT. */
static inline int standin_fault(const char *function, HRESULT *hr)
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
            if (!found && !strcmp(name, function) && count > 0) {
                found = !strcmp(kind, "call") ? FAULT_CALL : !strcmp(kind, "op") ? FAULT_OP : FAULT_STALL;
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

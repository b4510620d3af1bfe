/*
 * The stand-in HCS service's held console events (faults.h's hold): a
 * signal whose call lasts until its process exits, and the signals and
 * terminates of that process that wait behind it.
 *
 * "HCS serializes the signals sent to a target pid per compute system
 * handle" (hcsshim internal/hcs/v2 process.go Kill, which opens a second
 * system handle so that its terminate is not queued), and a servercore
 * process's signal call lasts "until the target process is terminated"
 * (hcsshim cmd/containerd-shim-runhcs-v1 exec_hcs.go, Bug36689012). So a
 * hold is kept per system handle (the one a process handle was created or
 * opened through) and process. Which calls HCS queues besides signals and
 * terminates, and what a cancel of the held call does inside HCS, are
 * not documented: here the cancel completes the held operation (as a
 * stalled one, HCS_E_OPERATION_TIMEOUT) and the queue stays held until
 * the exit.
 */
#include "hcsservice.h"
#include <stdlib.h>

typedef struct hold {
    struct hold *next;
    ULONGLONG via;
    process_t *proc;
    HANDLE done; /* set once the process has exited */
} hold_t;

static hold_t *holds;

typedef struct {
    hold_t *hold;
    sop_t *op;
    HRESULT hr;
    HANDLE process;
} held_t;

/* held_call completes the held call when the process exits (or the call
 * when cancelled), then lets the calls queued behind it go. */
static DWORD WINAPI held_call(void *arg)
{
    held_t *c = arg;
    HANDLE w[2] = {c->process, c->op->canceled};
    hold_t **q;
    sys_t *s = c->hold->proc->sys;
    if (WaitForMultipleObjects(2, w, FALSE, INFINITE) == WAIT_OBJECT_0 + 1) {
        op_complete(c->op, HCS_E_OPERATION_TIMEOUT, NULL, NULL);
        WaitForSingleObject(c->process, INFINITE);
    } else {
        op_complete(c->op, c->hr, NULL, NULL);
    }
    EnterCriticalSection(&lock);
    for (q = &holds; *q; q = &(*q)->next)
        if (*q == c->hold) {
            *q = c->hold->next;
            break;
        }
    SetEvent(c->hold->done);
    CloseHandle(c->hold->done);
    free(c->hold);
    system_release(s);
    LeaveCriticalSection(&lock);
    CloseHandle(c->process);
    free(c);
    return 0;
}

/* hold_start holds the signal call of op on p through the system handle
 * via until p exits; op then completes with hr. Under lock. */
void hold_start(ULONGLONG via, process_t *p, sop_t *op, HRESULT hr)
{
    held_t *c = calloc(1, sizeof(held_t));
    c->hold = calloc(1, sizeof(hold_t));
    c->hold->via = via;
    c->hold->proc = p;
    c->hold->done = CreateEventW(NULL, TRUE, FALSE, NULL);
    c->hold->next = holds;
    holds = c->hold;
    c->op = op;
    c->hr = hr;
    DuplicateHandle(GetCurrentProcess(), p->pi.hProcess, GetCurrentProcess(), &c->process, SYNCHRONIZE, FALSE, 0);
    system_hold(p->sys);
    CloseHandle(CreateThread(NULL, 0, held_call, c, 0, NULL));
}

typedef struct {
    HANDLE done;
    process_t *proc;
    sop_t *op;
    DWORD fn;
    WCHAR *options;
} queued_t;

/* queued_call runs a signal or terminate once the call it waited behind
 * is done, as HCS would then: on a process that has exited. */
static DWORD WINAPI queued_call(void *arg)
{
    queued_t *q = arg;
    BOOL held = FALSE;
    HRESULT hr, held_hr = S_OK;
    WaitForSingleObject(q->done, INFINITE);
    CloseHandle(q->done);
    EnterCriticalSection(&lock);
    hr = q->fn == FN_SIGNAL_PROCESS ? process_signal(q->proc, q->op, q->options, &held, &held_hr) : process_terminate(q->proc, q->op);
    if (FAILED(hr) || held)
        op_complete(q->op, FAILED(hr) ? hr : held_hr, NULL, NULL);
    system_release(q->proc->sys);
    LeaveCriticalSection(&lock);
    free(q->options);
    free(q);
    return 0;
}

/* hold_queue queues the call fn (a signal or terminate) of op on p
 * through the system handle via behind a held signal, if there is one,
 * and says whether it did. Under lock. */
BOOL hold_queue(ULONGLONG via, process_t *p, DWORD fn, sop_t *op, const WCHAR *options)
{
    hold_t *h;
    queued_t *q;
    for (h = holds; h && !(h->via == via && h->proc == p); h = h->next)
        ;
    if (!h)
        return FALSE;
    q = calloc(1, sizeof(queued_t));
    DuplicateHandle(GetCurrentProcess(), h->done, GetCurrentProcess(), &q->done, 0, FALSE, DUPLICATE_SAME_ACCESS);
    q->proc = p;
    q->op = op;
    q->fn = fn;
    q->options = options ? _wcsdup(options) : NULL;
    system_hold(p->sys);
    CloseHandle(CreateThread(NULL, 0, queued_call, q, 0, NULL));
    return TRUE;
}

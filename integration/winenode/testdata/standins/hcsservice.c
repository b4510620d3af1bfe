/*
 * The stand-in HCS service (computecore-service.exe): one process per
 * node, as HCS is the vmcompute service, serving the stand-in
 * computecore.dll of every process over the pipe of hcsproto.h. It owns
 * the compute systems (hcssystem.c) and the handles each client holds.
 *
 * Per the HCS reference (learn.microsoft.com virtualization/api/hcs)
 * and what hcsshim v0.15.0 relies on:
 *  - a handle is its process's: a client's handles are closed when the
 *    client goes (its pipe breaks), as the kernel closes a dead process's
 *    handles to HCS;
 *  - HcsCloseComputeSystem of the last handle of a system whose document
 *    says ShouldTerminateOnLastHandleClosed terminates it (HCS JSON
 *    schema, ComputeSystem.ShouldTerminateOnLastHandleClosed; hcsshim
 *    internal/hcsoci/create.go sets it in runhcs's process-isolated
 *    documents, so that a dead shim's systems go with it);
 *  - a stopped system is found by id while a handle to it is open, and
 *    its calls answer HCS_E_SYSTEM_ALREADY_STOPPED (hcsshim
 *    internal/hcs/errors.go ErrVmcomputeAlreadyStopped); with its last
 *    handle closed it is gone (HCS_E_SYSTEM_NOT_FOUND);
 *  - notifications go to every handle with a callback set, each its own
 *    (HcsSetComputeSystemCallback, HcsSetProcessCallback), and only those
 *    set when the event happens: an exit is not replayed to a callback set
 *    later (the reference pages document no replay of past events; a
 *    client that sets its callback after the create reads the process's
 *    properties for an exit it may have missed, as shim/hcs does);
 *  - a process's stdio reaches the caller as handles duplicated into its
 *    process (HCS_PROCESS_INFORMATION: the caller's handles, which it
 *    closes: hcsshim internal/hcs/process.go StdioLegacy).
 *
 * The service exits when no client is connected and no system exists.
 * Ended (a test kills it, as a crash or the node's reboot ends HCS), its
 * clients complete their operations in progress with
 * HCS_E_SERVICE_DISCONNECT and notify HcsEventServiceDisconnect
 * (computecore.c), and the service the next call starts knows no system,
 * as after a reboot; the systems' processes are left running, which a
 * reboot would not leave. It leaves unproven HCS's access checks (every
 * client may open every system) and how HCS itself recovers from a crash
 * of its service.
 */
#include "hcsservice.h"
#include "faults.h"
#include <stdlib.h>

CRITICAL_SECTION lock;

struct conn {
    HANDLE pipe;
    HANDLE client; /* the client's process, for its handles */
    CRITICAL_SECTION wlock;
    LONG refs;
};

typedef struct hnd {
    struct hnd *next;
    ULONGLONG id;
    conn_t *conn;
    sys_t *sys;
    process_t *proc; /* NULL for a system handle */
    ULONGLONG via;   /* a process handle's system handle (hcshold.c) */
    BOOL cb;
} hnd_t;

static hnd_t *hnds;
static sop_t *sops;
static ULONGLONG next_id = 0x1000;
static LONG nconns;

static void conn_release(conn_t *c)
{
    if (InterlockedDecrement(&c->refs))
        return;
    CloseHandle(c->pipe);
    if (c->client)
        CloseHandle(c->client);
    DeleteCriticalSection(&c->wlock);
    free(c);
}

static void conn_send(conn_t *c, hcs_msg *m, const WCHAR *s1)
{
    EnterCriticalSection(&c->wlock);
    msg_send(c->pipe, m, s1, NULL);
    LeaveCriticalSection(&c->wlock);
}

/* dup_to_client duplicates h into the client's process: the handle value
 * the client reads, 0 for none. */
static ULONGLONG dup_to_client(conn_t *c, HANDLE h)
{
    HANDLE out = NULL;
    if (!h || !c->client)
        return 0;
    if (!DuplicateHandle(GetCurrentProcess(), h, c->client, &out, 0, FALSE, DUPLICATE_SAME_ACCESS))
        return 0;
    return (ULONGLONG)(ULONG_PTR)out;
}

/* op_complete sends op's completion to its client and forgets op. With
 * stdio, the process's held stdio handles go with it. Not under lock. */
void op_complete(sop_t *op, HRESULT hr, const WCHAR *result, const process_t *stdio)
{
    hcs_msg m = {0};
    sop_t **p;
    EnterCriticalSection(&lock);
    for (p = &sops; *p; p = &(*p)->next)
        if (*p == op) {
            *p = op->next;
            break;
        }
    m.kind = MSG_OP_DONE;
    m.op = op->id;
    m.hr = hr;
    if (stdio && SUCCEEDED(hr)) {
        m.pid = stdio->pi.dwProcessId;
        for (int i = 0; i < 3; i++)
            m.std[i] = dup_to_client(op->conn, stdio->std[i]);
    }
    LeaveCriticalSection(&lock);
    conn_send(op->conn, &m, result);
    conn_release(op->conn);
    CloseHandle(op->canceled);
    free(op);
}

/* deliver notifies each handle of s (p NULL) or of p that has a callback
 * set. */
static void deliver(sys_t *s, process_t *p, UINT32 type, const WCHAR *data)
{
    hnd_t *h;
    EnterCriticalSection(&lock);
    for (h = hnds; h; h = h->next)
        if (h->cb && h->sys == s && h->proc == p) {
            hcs_msg m = {0};
            m.kind = MSG_EVENT;
            m.h = h->id;
            m.a = type;
            conn_send(h->conn, &m, data);
        }
    LeaveCriticalSection(&lock);
}

typedef struct {
    sys_t *s;
    process_t *p;
    UINT32 type;
    DWORD delay;
    WCHAR data[160];
} late_t;

/* deliver_late delivers a notification delay ms late; it holds the system
 * (and so its processes) until then. */
static DWORD WINAPI deliver_late(void *arg)
{
    late_t *l = arg;
    Sleep(l->delay);
    EnterCriticalSection(&lock);
    deliver(l->s, l->p, l->type, l->data);
    system_release(l->s);
    LeaveCriticalSection(&lock);
    free(l);
    return 0;
}

/* deliver_after delivers a notification delay ms from now, on a thread of
 * its own. */
static void deliver_after(sys_t *s, process_t *p, UINT32 type, const WCHAR *data, DWORD delay)
{
    late_t *l = calloc(1, sizeof(late_t));
    l->s = s;
    l->p = p;
    l->type = type;
    l->delay = delay;
    wcsncpy(l->data, data, 159);
    EnterCriticalSection(&lock);
    system_hold(s);
    LeaveCriticalSection(&lock);
    CloseHandle(CreateThread(NULL, 0, deliver_late, l, 0, NULL));
}

/* send_event notifies each handle of s (p NULL) or of p that has a
 * callback set, as the test's fault of the notification (faults.h) says:
 * lost, twice or late. */
void send_event(sys_t *s, process_t *p, UINT32 type, const WCHAR *data)
{
    HRESULT hr = S_OK;
    WCHAR again[160];
    switch (standin_fault(type == EVENT_SYSTEM_EXITED ? "HcsEventSystemExited" : "HcsEventProcessExited", FAULTS_OF_EVENT, &hr)) {
    case FAULT_LOST:
        return;
    case FAULT_TWICE:
        deliver(s, p, type, data);
        if (hr == S_OK)
            wcsncpy(again, data, 159);
        else if (p)
            swprintf(again, 160, L"{\"ProcessId\":%lu,\"Exited\":true,\"ExitCode\":%lu}", p->pi.dwProcessId, (DWORD)hr);
        else
            swprintf(again, 160, L"{\"Status\":%ld,\"ExitType\":\"UnexpectedExit\"}", (long)hr);
        again[159] = 0;
        /* The duplicate is a second notification, after the first: each
         * is delivered on a thread of its own (hcsclient.c notify), so
         * two sent at once may reach the callback in either order. */
        deliver_after(s, p, type, again, 100);
        return;
    case FAULT_LATE:
        deliver_after(s, p, type, data, 300);
        return;
    }
    deliver(s, p, type, data);
}

int system_handles(const sys_t *s)
{
    int n = 0;
    hnd_t *h;
    for (h = hnds; h; h = h->next)
        n += h->sys == s && !h->proc;
    return n;
}

/* -- faults (faults.h) -- */

static DWORD WINAPI stall_later(void *arg)
{
    sop_t *op = arg;
    WaitForSingleObject(op->canceled, 60000);
    op_complete(op, HCS_E_OPERATION_TIMEOUT, NULL, NULL);
    return 0;
}

typedef struct {
    sop_t *op;
    HRESULT hr;
} deaf_t;

static DWORD WINAPI deaf_later(void *arg)
{
    deaf_t *d = arg;
    Sleep(5000);
    op_complete(d->op, d->hr, NULL, NULL);
    free(d);
    return 0;
}

/* fault_apply applies a fault of kind call, op, stall or deaf of function
 * to op: it answers whether the function is done, and with what. A stalled
 * operation completes once cancelled (or after a minute, so that no test
 * hangs on a caller that never cancels). */
BOOL fault_apply(int kind, HRESULT hr, const char *function, sop_t *op, HRESULT *ret)
{
    *ret = S_OK;
    switch (kind) {
    case FAULT_CALL:
        *ret = hr;
        return TRUE;
    case FAULT_OP: {
        WCHAR doc[160];
        swprintf(doc, 160, L"{\"Error\":%ld,\"ErrorMessage\":\"the stand-in's fault for %hs\"}", (long)hr, function);
        op_complete(op, hr, doc, NULL);
        return TRUE;
    }
    case FAULT_STALL:
        CloseHandle(CreateThread(NULL, 0, stall_later, op, 0, NULL));
        return TRUE;
    case FAULT_DEAF: {
        deaf_t *d = calloc(1, sizeof(deaf_t));
        d->op = op;
        d->hr = hr;
        CloseHandle(CreateThread(NULL, 0, deaf_later, d, 0, NULL));
        return TRUE;
    }
    }
    return FALSE;
}

BOOL faulted(const char *function, sop_t *op, HRESULT *ret)
{
    HRESULT hr = S_OK;
    int kind = standin_fault(function, FAULTS_OF_CALL, &hr);
    return fault_apply(kind, hr, function, op, ret);
}

/* -- handles -- */

static hnd_t *handle_add(conn_t *c, sys_t *s, process_t *p)
{
    hnd_t *h = calloc(1, sizeof(hnd_t));
    h->id = next_id++;
    h->conn = c;
    h->sys = s;
    h->proc = p;
    h->next = hnds;
    hnds = h;
    system_hold(s);
    return h;
}

static hnd_t *handle_find(conn_t *c, ULONGLONG id, BOOL process)
{
    hnd_t *h;
    for (h = hnds; h; h = h->next)
        if (h->id == id && h->conn == c && (h->proc != NULL) == process)
            return h;
    return NULL;
}

/* handle_close closes h; the last handle of a system that is to
 * terminate on it terminates the system. */
static void handle_close(hnd_t *h)
{
    hnd_t **p;
    sys_t *s = h->sys;
    for (p = &hnds; *p; p = &(*p)->next)
        if (*p == h) {
            *p = h->next;
            break;
        }
    if (!h->proc && system_handles(s) == 0 && system_terminate_on_close(s))
        system_terminate_now(s);
    free(h);
    system_release(s);
}

static void conn_gone(conn_t *c)
{
    hnd_t *h, *next;
    EnterCriticalSection(&lock);
    for (h = hnds; h; h = next) {
        next = h->next;
        if (h->conn == c && h->proc)
            handle_close(h);
    }
    for (h = hnds; h; h = next) {
        next = h->next;
        if (h->conn == c)
            handle_close(h);
    }
    nconns--;
    LeaveCriticalSection(&lock);
}

/* new_op is the service's side of the client's operation of m. */
static sop_t *new_op(conn_t *c, const hcs_msg *m)
{
    sop_t *op = calloc(1, sizeof(sop_t));
    op->conn = c;
    op->id = m->op;
    op->canceled = CreateEventW(NULL, TRUE, FALSE, NULL);
    InterlockedIncrement(&c->refs);
    op->next = sops;
    sops = op;
    return op;
}

static void drop_op(sop_t *op)
{
    sop_t **p;
    for (p = &sops; *p; p = &(*p)->next)
        if (*p == op) {
            *p = op->next;
            break;
        }
    conn_release(op->conn);
    CloseHandle(op->canceled);
    free(op);
}

static HRESULT cancel(conn_t *c, ULONGLONG id)
{
    sop_t *op;
    for (op = sops; op; op = op->next)
        if (op->conn == c && op->id == id) {
            SetEvent(op->canceled);
            return S_OK;
        }
    return HRESULT_FROM_WIN32(ERROR_INVALID_HANDLE);
}

/* -- calls -- */

/* system_call runs a call on a system handle's system. */
static HRESULT system_call(conn_t *c, const hcs_msg *m, const WCHAR *s1, sop_t *op)
{
    hnd_t *h = handle_find(c, m->h, FALSE);
    if (!h)
        return HRESULT_FROM_WIN32(ERROR_INVALID_HANDLE);
    switch (m->fn) {
    case FN_START_SYSTEM:
        return system_start(h->sys, op);
    case FN_SHUTDOWN_SYSTEM:
        return system_shutdown(h->sys, op);
    case FN_TERMINATE_SYSTEM:
        return system_terminate(h->sys, op);
    case FN_MODIFY_SYSTEM:
        return system_modify(h->sys, op, s1);
    case FN_SYSTEM_PROPERTIES:
        return system_properties(h->sys, op, s1);
    }
    return E_INVALIDARG;
}

/* process_call runs a call on a process handle's process. */
static HRESULT process_call(conn_t *c, const hcs_msg *m, const WCHAR *s1, sop_t *op)
{
    hnd_t *h = handle_find(c, m->h, TRUE);
    BOOL held = FALSE;
    HRESULT hr, held_hr = S_OK;
    if (!h)
        return HRESULT_FROM_WIN32(ERROR_INVALID_HANDLE);
    switch (m->fn) {
    case FN_PROCESS_INFO:
        return process_info(h->proc, op);
    case FN_SIGNAL_PROCESS:
        if (hold_queue(h->via, h->proc, m->fn, op, s1))
            return S_OK;
        hr = process_signal(h->proc, op, s1, &held, &held_hr);
        if (SUCCEEDED(hr) && held)
            hold_start(h->via, h->proc, op, held_hr);
        return hr;
    case FN_TERMINATE_PROCESS:
        if (hold_queue(h->via, h->proc, m->fn, op, s1))
            return S_OK;
        return process_terminate(h->proc, op);
    case FN_MODIFY_PROCESS:
        return process_modify(h->proc, op, s1);
    case FN_PROCESS_PROPERTIES:
        return process_properties(h->proc, op, s1);
    }
    return E_INVALIDARG;
}

/* handle_call runs the calls that take no operation; *out is a new
 * handle's id. */
static HRESULT handle_call(conn_t *c, const hcs_msg *m, const WCHAR *s1, ULONGLONG *out)
{
    hnd_t *h;
    sys_t *s;
    process_t *p;
    switch (m->fn) {
    case FN_OPEN_SYSTEM:
        if (!s1 || !(s = system_find(s1)))
            return HCS_E_SYSTEM_NOT_FOUND;
        *out = handle_add(c, s, NULL)->id;
        return S_OK;
    case FN_CLOSE_SYSTEM:
    case FN_CLOSE_PROCESS:
        if (!(h = handle_find(c, m->h, m->fn == FN_CLOSE_PROCESS)))
            return HRESULT_FROM_WIN32(ERROR_INVALID_HANDLE);
        handle_close(h);
        return S_OK;
    case FN_SYSTEM_CALLBACK:
    case FN_PROCESS_CALLBACK:
        if (!(h = handle_find(c, m->h, m->fn == FN_PROCESS_CALLBACK)))
            return HRESULT_FROM_WIN32(ERROR_INVALID_HANDLE);
        h->cb = m->a != 0;
        return S_OK;
    case FN_OPEN_PROCESS:
        if (!(h = handle_find(c, m->h, FALSE)))
            return HRESULT_FROM_WIN32(ERROR_INVALID_HANDLE);
        if (!(p = process_find(h->sys, m->a)))
            return HCS_E_PROCESS_NOT_FOUND;
        *out = (h = handle_add(c, h->sys, p))->id;
        h->via = m->h;
        return S_OK;
    case FN_CANCEL:
        return cancel(c, m->op);
    }
    return E_INVALIDARG;
}

/* dispatch runs one call; an operation the call did not start (it
 * failed) is dropped, as HCS starts none. */
static HRESULT dispatch(conn_t *c, const hcs_msg *m, const WCHAR *s1, const WCHAR *s2, ULONGLONG *out)
{
    sop_t *op;
    HRESULT hr;
    sys_t *s = NULL;
    process_t *p = NULL;
    hnd_t *h;
    switch (m->fn) {
    case FN_OPEN_SYSTEM:
    case FN_CLOSE_SYSTEM:
    case FN_CLOSE_PROCESS:
    case FN_SYSTEM_CALLBACK:
    case FN_PROCESS_CALLBACK:
    case FN_OPEN_PROCESS:
    case FN_CANCEL:
        return handle_call(c, m, s1, out);
    }
    op = new_op(c, m);
    switch (m->fn) {
    case FN_CREATE_SYSTEM:
        hr = s1 && s2 ? system_create(s1, s2, op, &s) : E_INVALIDARG;
        if (SUCCEEDED(hr) && s) {
            *out = handle_add(c, s, NULL)->id;
            system_release(s);
        }
        break;
    case FN_ENUMERATE:
        systems_enumerate(s1, op);
        hr = S_OK;
        break;
    case FN_CREATE_PROCESS:
        if (!(h = handle_find(c, m->h, FALSE))) {
            hr = HRESULT_FROM_WIN32(ERROR_INVALID_HANDLE);
            break;
        }
        hr = process_create(h->sys, s1, op, &p);
        if (SUCCEEDED(hr) && p) {
            *out = (h = handle_add(c, h->sys, p))->id;
            h->via = m->h;
        }
        break;
    case FN_START_SYSTEM:
    case FN_SHUTDOWN_SYSTEM:
    case FN_TERMINATE_SYSTEM:
    case FN_MODIFY_SYSTEM:
    case FN_SYSTEM_PROPERTIES:
        hr = system_call(c, m, s1, op);
        break;
    default:
        hr = process_call(c, m, s1, op);
    }
    if (FAILED(hr))
        drop_op(op);
    return hr;
}

static DWORD WINAPI serve(void *arg)
{
    conn_t *c = arg;
    for (;;) {
        const WCHAR *s1, *s2;
        hcs_msg *m = msg_recv(c->pipe, &s1, &s2), r = {0};
        ULONGLONG out = 0;
        if (!m)
            break;
        if (m->kind == MSG_CALL && m->fn == FN_HELLO) {
            if (!c->client)
                c->client = OpenProcess(PROCESS_DUP_HANDLE, FALSE, m->a);
            HeapFree(GetProcessHeap(), 0, m);
            continue;
        }
        if (m->kind != MSG_CALL) {
            HeapFree(GetProcessHeap(), 0, m);
            continue;
        }
        EnterCriticalSection(&lock);
        r.hr = dispatch(c, m, s1, s2, &out);
        r.kind = MSG_REPLY;
        r.seq = m->seq;
        r.h = out;
        /* The reply goes out under the lock: a completion sent after it
         * may not overtake it. */
        conn_send(c, &r, NULL);
        LeaveCriticalSection(&lock);
        HeapFree(GetProcessHeap(), 0, m);
    }
    conn_gone(c);
    conn_release(c);
    return 0;
}

/* quiet points the process's Linux standard descriptors at /dev/null: a
 * process Wine starts keeps its parent's, and a service that outlives its
 * starter would hold the starter's output open. Wine has no Windows call
 * for it. */
static void quiet(void)
{
    long fd = standin_linux2(2 /* open */, "/dev/null", (const char *)2 /* O_RDWR */);
    if (fd < 0)
        return;
    for (long i = 0; i < 3; i++)
        standin_linux2(33 /* dup2 */, (const char *)(LONG_PTR)fd, (const char *)(LONG_PTR)i);
}

/* idle ends the service once it has had no client and no system for
 * 2 s, so that a node's wineserver can exit. */
static DWORD WINAPI idle(void *arg)
{
    int quiet_for = 0;
    (void)arg;
    for (;;) {
        Sleep(250);
        EnterCriticalSection(&lock);
        quiet_for = nconns == 0 && !systems_any() ? quiet_for + 1 : 0;
        LeaveCriticalSection(&lock);
        if (quiet_for >= 8)
            ExitProcess(0);
    }
}

int WINAPI wWinMain(HINSTANCE inst, HINSTANCE prev, PWSTR cmd, int show)
{
    DWORD flags = PIPE_ACCESS_DUPLEX | FILE_FLAG_OVERLAPPED | FILE_FLAG_FIRST_PIPE_INSTANCE;
    (void)inst;
    (void)prev;
    (void)cmd;
    (void)show;
    quiet();
    InitializeCriticalSection(&lock);
    CloseHandle(CreateThread(NULL, 0, idle, NULL, 0, NULL));
    for (;;) {
        conn_t *c;
        HANDLE p = CreateNamedPipeW(HCS_SERVICE_PIPE, flags, PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT,
                                    PIPE_UNLIMITED_INSTANCES, 65536, 65536, 0, NULL);
        OVERLAPPED o = {0};
        DWORD n;
        if (p == INVALID_HANDLE_VALUE)
            return 1; /* another service serves the node */
        flags &= ~FILE_FLAG_FIRST_PIPE_INSTANCE;
        o.hEvent = CreateEventW(NULL, TRUE, FALSE, NULL);
        if (!ConnectNamedPipe(p, &o) && GetLastError() == ERROR_IO_PENDING)
            GetOverlappedResult(p, &o, &n, TRUE);
        CloseHandle(o.hEvent);
        c = calloc(1, sizeof(conn_t));
        c->pipe = p;
        c->refs = 1;
        InitializeCriticalSection(&c->wlock);
        EnterCriticalSection(&lock);
        nconns++;
        LeaveCriticalSection(&lock);
        CloseHandle(CreateThread(NULL, 0, serve, c, 0, NULL));
    }
}

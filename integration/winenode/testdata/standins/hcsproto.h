/*
 * The wire between the stand-in computecore.dll (computecore.c, in every
 * process that calls HCS) and the stand-in HCS service (hcsservice.c,
 * one process per node, as HCS is the vmcompute service): one duplex
 * message pipe per client process, on which the client sends calls and
 * the service answers each call in order, and sends operation completions
 * and notifications as they happen. A client's first message, unanswered,
 * is FN_HELLO with its process id, into which the service duplicates the
 * stdio handles it hands over.
 *
 * A message is an hcs_msg followed by its strings (UTF-16, each with its
 * NUL; a length of 0 is a NULL string).
 */
#include <windows.h>

#define HCS_SERVICE_PIPE L"\\\\.\\pipe\\winproc-standin-hcs"
#define HCS_SERVICE_EXE L"computecore-service.exe"

enum { MSG_CALL = 1, MSG_REPLY, MSG_OP_DONE, MSG_EVENT };

enum {
    FN_HELLO = 1,
    FN_CREATE_SYSTEM,
    FN_OPEN_SYSTEM,
    FN_CLOSE_SYSTEM,
    FN_START_SYSTEM,
    FN_SHUTDOWN_SYSTEM,
    FN_TERMINATE_SYSTEM,
    FN_MODIFY_SYSTEM,
    FN_SYSTEM_PROPERTIES,
    FN_SYSTEM_CALLBACK,
    FN_ENUMERATE,
    FN_CREATE_PROCESS,
    FN_OPEN_PROCESS,
    FN_PROCESS_INFO,
    FN_CLOSE_PROCESS,
    FN_SIGNAL_PROCESS,
    FN_TERMINATE_PROCESS,
    FN_MODIFY_PROCESS,
    FN_PROCESS_PROPERTIES,
    FN_PROCESS_CALLBACK,
    FN_CANCEL,
};

typedef struct {
    DWORD size; /* bytes, with the strings */
    DWORD kind; /* MSG_* */
    DWORD fn;   /* FN_* of a call */
    DWORD seq;  /* a call's number, which its reply repeats */
    ULONGLONG h;  /* the service's handle of a system or process */
    ULONGLONG op; /* the client's operation */
    DWORD a;      /* a call's DWORD argument; an event's type */
    LONG hr;      /* a reply's or a completion's HRESULT */
    DWORD pid;    /* a completion's process id */
    DWORD pad;
    ULONGLONG std[3]; /* a completion's stdio, handles in the client */
    DWORD n1, n2;     /* the strings' lengths in WCHARs */
} hcs_msg;

/* io waits for one overlapped read or write on pipe: the pipe is opened
 * for overlapped I/O on both ends, because a synchronous handle would hold
 * a write behind the read that waits on it. */
static inline BOOL io(HANDLE pipe, BOOL write, void *buf, DWORD n, DWORD *done)
{
    OVERLAPPED o = {0};
    BOOL ok;
    o.hEvent = CreateEventW(NULL, TRUE, FALSE, NULL);
    ok = write ? WriteFile(pipe, buf, n, NULL, &o) : ReadFile(pipe, buf, n, NULL, &o);
    if (!ok && GetLastError() == ERROR_IO_PENDING)
        ok = TRUE;
    ok = ok && GetOverlappedResult(pipe, &o, done, TRUE);
    CloseHandle(o.hEvent);
    return ok;
}

/* msg_send writes m with strings s1 and s2 to pipe (the caller
 * serializes writers). */
static inline BOOL msg_send(HANDLE pipe, hcs_msg *m, const WCHAR *s1, const WCHAR *s2)
{
    DWORD n1 = s1 ? (DWORD)wcslen(s1) + 1 : 0, n2 = s2 ? (DWORD)wcslen(s2) + 1 : 0, done;
    DWORD size = sizeof(hcs_msg) + (n1 + n2) * sizeof(WCHAR);
    char *buf = HeapAlloc(GetProcessHeap(), 0, size);
    BOOL ok;
    if (!buf)
        return FALSE;
    m->size = size;
    m->n1 = n1;
    m->n2 = n2;
    memcpy(buf, m, sizeof(hcs_msg));
    if (n1)
        memcpy(buf + sizeof(hcs_msg), s1, n1 * sizeof(WCHAR));
    if (n2)
        memcpy(buf + sizeof(hcs_msg) + n1 * sizeof(WCHAR), s2, n2 * sizeof(WCHAR));
    ok = io(pipe, TRUE, buf, size, &done) && done == size;
    HeapFree(GetProcessHeap(), 0, buf);
    return ok;
}

static inline BOOL read_full(HANDLE pipe, void *buf, DWORD n)
{
    DWORD got;
    char *p = buf;
    while (n > 0) {
        if (!io(pipe, FALSE, p, n, &got) || got == 0)
            return FALSE;
        p += got;
        n -= got;
    }
    return TRUE;
}

/* msg_recv reads a message; *s1 and *s2 point into it (or are NULL).
 * HeapFree the message. */
static inline hcs_msg *msg_recv(HANDLE pipe, const WCHAR **s1, const WCHAR **s2)
{
    hcs_msg head, *m;
    if (!read_full(pipe, &head, sizeof(head)) || head.size < sizeof(head) || head.size > (64u << 20) ||
        (head.n1 + head.n2) * sizeof(WCHAR) != head.size - sizeof(head))
        return NULL;
    m = HeapAlloc(GetProcessHeap(), 0, head.size);
    if (!m)
        return NULL;
    *m = head;
    if (!read_full(pipe, (char *)m + sizeof(head), head.size - sizeof(head))) {
        HeapFree(GetProcessHeap(), 0, m);
        return NULL;
    }
    *s1 = m->n1 ? (const WCHAR *)(m + 1) : NULL;
    *s2 = m->n2 ? (const WCHAR *)(m + 1) + m->n1 : NULL;
    return m;
}

/*
 * The stand-in HCS service's processes in a compute system (what each
 * call follows: hcssystem.c's comment).
 */
#include "hcsservice.h"
#include "faults.h"
#include <stdio.h>
#include <stdlib.h>

static LONG pipe_seq;

/* std_pipe makes a pipe whose overlapped server end is the caller's and
 * whose client end, inheritable, the child's. */
static BOOL std_pipe(BOOL child_reads, HANDLE *caller, HANDLE *child)
{
    WCHAR name[128];
    SECURITY_ATTRIBUTES sa = {sizeof(sa), NULL, TRUE};
    swprintf(name, 128, L"\\\\.\\pipe\\standin-hcs-%lu-%ld", GetCurrentProcessId(), InterlockedIncrement(&pipe_seq));
    *caller = CreateNamedPipeW(name, (child_reads ? PIPE_ACCESS_OUTBOUND : PIPE_ACCESS_INBOUND) | FILE_FLAG_OVERLAPPED,
                               PIPE_TYPE_BYTE | PIPE_WAIT, 1, 65536, 65536, 0, NULL);
    if (*caller == INVALID_HANDLE_VALUE) {
        *caller = NULL;
        return FALSE;
    }
    *child = CreateFileW(name, child_reads ? GENERIC_READ : GENERIC_WRITE, 0, &sa, OPEN_EXISTING, 0, NULL);
    if (*child == INVALID_HANDLE_VALUE) {
        *child = NULL;
        return FALSE;
    }
    return TRUE;
}

/* keep_process_document adds a process's parameters to the documents. */
static void keep_process_document(const sys_t *s, DWORD pid, const WCHAR *params)
{
    WCHAR name[300];
    swprintf(name, 300, L"%ls-process-%lu", s->id, pid);
    keep_document(name, params);
}

/* watch_process notifies the process's exit to the handles with a
 * callback set then; it holds the system until then. */
static DWORD WINAPI watch_process(void *arg)
{
    process_t *p = arg;
    DWORD code = 0;
    WCHAR data[128];
    WaitForSingleObject(p->pi.hProcess, INFINITE);
    GetExitCodeProcess(p->pi.hProcess, &code);
    EnterCriticalSection(&lock);
    p->exited = TRUE;
    p->code = code;
    swprintf(data, 128, L"{\"ProcessId\":%lu,\"Exited\":true,\"ExitCode\":%lu}", p->pi.dwProcessId, code);
    send_event(p->sys, p, EVENT_PROCESS_EXITED, data);
    system_release(p->sys);
    LeaveCriticalSection(&lock);
    return 0;
}

static void close_all(HANDLE *h, int n)
{
    for (int i = 0; i < n; i++)
        if (h[i]) {
            CloseHandle(h[i]);
            h[i] = NULL;
        }
}

/* start_process starts the command suspended with the pipes asked for;
 * on failure nothing it made is left open. */
static DWORD start_process(sys_t *s, const WCHAR *params, process_t *p)
{
    static WCHAR line[32768], rewritten[32768];
    WCHAR dir[MAX_PATH], wd[MAX_PATH];
    HANDLE child[3] = {NULL, NULL, NULL};
    STARTUPINFOW si = {sizeof(si)};
    WCHAR *env;
    BOOL ok;
    DWORD err = 0;
    if (!command_line(params, line, 32768))
        return ERROR_INVALID_PARAMETER;
    container_path(s->volume, line, rewritten, 32768);
    with_program(s->volume, rewritten, line, 32768);
    dir[0] = 0;
    if (json_string(params, L"WorkingDirectory", wd, MAX_PATH))
        container_path(s->volume, wd, dir, MAX_PATH);
    if (!dir[0])
        wcscpy(dir, s->volume);
    if ((json_true(params, L"CreateStdInPipe") && !std_pipe(TRUE, &p->std[0], &child[0])) ||
        (json_true(params, L"CreateStdOutPipe") && !std_pipe(FALSE, &p->std[1], &child[1])) ||
        (json_true(params, L"CreateStdErrPipe") && !std_pipe(FALSE, &p->std[2], &child[2]))) {
        err = GetLastError();
        close_all(child, 3);
        close_all(p->std, 3);
        return err;
    }
    si.dwFlags = STARTF_USESTDHANDLES;
    si.hStdInput = child[0];
    si.hStdOutput = child[1];
    si.hStdError = child[2];
    env = environment(params, s->hostname);
    ok = CreateProcessW(NULL, line, NULL, NULL, TRUE, CREATE_SUSPENDED | CREATE_UNICODE_ENVIRONMENT, env, dir, &si, &p->pi);
    if (!ok)
        err = GetLastError();
    free(env);
    close_all(child, 3);
    if (!ok)
        close_all(p->std, 3);
    return err;
}

HRESULT process_create(sys_t *s, const WCHAR *params, sop_t *op, process_t **out)
{
    process_t *p;
    DWORD err;
    HRESULT hr = S_OK, ret;
    int kind = standin_fault("HcsCreateProcess", FAULTS_OF_CREATE_PROCESS, &hr);
    *out = NULL;
    if (kind != FAULT_SPURIOUS && fault_apply(kind, hr, "HcsCreateProcess", op, &ret))
        return ret;
    if (s->state != STATE_RUNNING)
        return s->state == STATE_STOPPED ? HCS_E_SYSTEM_ALREADY_STOPPED : HCS_E_INVALID_STATE;
    p = calloc(1, sizeof(process_t));
    if ((err = start_process(s, params, p)) != 0) {
        WCHAR msg[160];
        swprintf(msg, 160, L"{\"Error\":%ld,\"ErrorMessage\":\"CreateProcess failed in the container\"}", (long)HRESULT_FROM_WIN32(err));
        free(p);
        if (err == ERROR_INVALID_PARAMETER)
            return HCS_E_INVALID_JSON;
        op_complete(op, HRESULT_FROM_WIN32(err), msg, NULL);
        return S_OK;
    }
    AssignProcessToJobObject(s->job, p->pi.hProcess);
    ResumeThread(p->pi.hThread);
    keep_process_document(s, p->pi.dwProcessId, params);
    p->sys = s;
    p->next = s->processes;
    s->processes = p;
    system_hold(s);
    CloseHandle(CreateThread(NULL, 0, watch_process, p, 0, NULL));
    *out = p;
    if (kind == FAULT_SPURIOUS) {
        /* The process runs; only the operation says otherwise, and
         * HcsGetProcessInfo still hands over its pipes (faults.h). */
        WCHAR msg[160];
        swprintf(msg, 160, L"{\"Error\":%ld,\"ErrorMessage\":\"the stand-in's fault for HcsCreateProcess\"}", (long)hr);
        op_complete(op, hr, msg, NULL);
        return S_OK;
    }
    op_complete(op, S_OK, NULL, p);
    return S_OK;
}

/* process_find finds a process of s that has not exited: HCS no longer
 * opens one that has (hcsshim internal/hcs/errors.go counts
 * ERROR_NOT_FOUND as the process having stopped). */
process_t *process_find(sys_t *s, DWORD pid)
{
    process_t *p;
    for (p = s->processes; p; p = p->next)
        if (p->pi.dwProcessId == pid && !p->exited && WaitForSingleObject(p->pi.hProcess, 0) != WAIT_OBJECT_0)
            return p;
    return NULL;
}

/* process_info hands back the process's id and the stdio handles the
 * service still holds, as new handles of the caller. */
HRESULT process_info(process_t *p, sop_t *op)
{
    op_complete(op, S_OK, NULL, p);
    return S_OK;
}

static BOOL has_exited(process_t *p) { return p->exited || WaitForSingleObject(p->pi.hProcess, 0) == WAIT_OBJECT_0; }

/* process_signal delivers the console event of options. With the test's
 * hold fault (faults.h) it leaves op to the caller, sets *held, and gives
 * the HRESULT op is to complete with in *held_hr. */
HRESULT process_signal(process_t *p, sop_t *op, const WCHAR *options, BOOL *held, HRESULT *held_hr)
{
    static const struct {
        const WCHAR *name;
        DWORD event;
    } signals[] = {{L"CtrlC", CTRL_C_EVENT}, {L"CtrlBreak", CTRL_BREAK_EVENT}, {L"CtrlClose", CTRL_CLOSE_EVENT},
                   {L"CtrlLogOff", CTRL_LOGOFF_EVENT}, {L"CtrlShutdown", CTRL_SHUTDOWN_EVENT}};
    WCHAR sig[32] = L"CtrlC";
    size_t i;
    HRESULT hr = S_OK, ret;
    int kind = standin_fault("HcsSignalProcess", FAULTS_OF_SIGNAL, &hr);
    *held = FALSE;
    if (kind != FAULT_HOLD && fault_apply(kind, hr, "HcsSignalProcess", op, &ret))
        return ret;
    if (options && wcsstr(options, L"\"Signal\":") && !json_string(options, L"Signal", sig, 32))
        return HCS_E_INVALID_JSON;
    for (i = 0; i < sizeof(signals) / sizeof(signals[0]) && wcscmp(sig, signals[i].name); i++)
        ;
    if (i == sizeof(signals) / sizeof(signals[0]))
        return HCS_E_INVALID_JSON;
    if (has_exited(p))
        return HCS_E_PROCESS_ALREADY_STOPPED;
    ctrl_event(p->pi.hProcess, signals[i].event);
    if (kind == FAULT_HOLD) {
        *held = TRUE;
        *held_hr = hr;
        return S_OK;
    }
    op_complete(op, S_OK, NULL, NULL);
    return S_OK;
}

HRESULT process_terminate(process_t *p, sop_t *op)
{
    HRESULT hr;
    if (faulted("HcsTerminateProcess", op, &hr))
        return hr;
    if (has_exited(p))
        return HCS_E_PROCESS_ALREADY_STOPPED;
    TerminateProcess(p->pi.hProcess, 1);
    op_complete(op, S_OK, NULL, NULL);
    return S_OK;
}

/* process_modify closes a stdio handle the service holds (CloseHandle:
 * StdIn, StdOut, StdErr or All; the child reads EOF once the caller's
 * copy is closed too) or takes a console size. */
HRESULT process_modify(process_t *p, sop_t *op, const WCHAR *settings)
{
    WCHAR operation[64] = L"", handle[32] = L"";
    if (!json_string(settings, L"Operation", operation, 64))
        return HCS_E_INVALID_JSON;
    if (!wcscmp(operation, L"CloseHandle")) {
        static const WCHAR *names[] = {L"StdIn", L"StdOut", L"StdErr"};
        BOOL all;
        json_string(settings, L"Handle", handle, 32);
        all = !wcscmp(handle, L"All");
        for (int i = 0; i < 3; i++)
            if ((all || !wcscmp(handle, names[i])) && p->std[i]) {
                CloseHandle(p->std[i]);
                p->std[i] = NULL;
            }
        if (!all && wcscmp(handle, L"StdIn") && wcscmp(handle, L"StdOut") && wcscmp(handle, L"StdErr"))
            return HCS_E_INVALID_JSON;
    } else if (wcscmp(operation, L"ConsoleSize") || !wcsstr(settings, L"\"ConsoleSize\":{")) {
        return HCS_E_INVALID_JSON;
    }
    op_complete(op, S_OK, NULL, NULL);
    return S_OK;
}

HRESULT process_properties(process_t *p, sop_t *op, const WCHAR *query)
{
    WCHAR doc[128];
    DWORD code = 0;
    BOOL done = has_exited(p);
    (void)query;
    GetExitCodeProcess(p->pi.hProcess, &code);
    swprintf(doc, 128, L"{\"ProcessId\":%lu,\"Exited\":%ls,\"ExitCode\":%lu}", p->pi.dwProcessId, done ? L"true" : L"false", done ? code : 0);
    op_complete(op, S_OK, doc, NULL);
    return S_OK;
}

/*
 * The stand-in HCS service's compute systems, serving process-isolated
 * containers with real Windows processes. A compute system is a job
 * object; its processes are started suspended, put in the job and
 * resumed. Operations complete on the service's threads; results are
 * documents of the HCS JSON schema (learn.microsoft.com
 * virtualization/api/hcs/schemareference).
 *
 * Wine has no silos, so a container cannot have a C: of its own. The
 * container's C:\ is its volume instead: the directory the layer stand-in
 * (vmcompute.c) made for the scratch named by the document's
 * Storage.Path. Every C:\ in a process's command line and working
 * directory is read as a path in that directory; a program named without
 * a directory is looked for there first; a mapped directory or file is a
 * Linux symbolic link in it, the directories above it made if missing. Each document a system is created with is kept in
 * C:\ProgramData\winproc-standins\documents\<id>.json, each process's
 * parameters in <id>-process-<pid>.json.
 *
 * Per the HCS reference and the schema, and hcsshim v0.15.0 where they
 * are silent:
 *  - HcsEnumerateComputeSystems lists every system of the node with its
 *    State (Created, Running, Stopped: schema's ComputeSystemState), of
 *    the Owners the query names, if it names any (SystemQuery);
 *  - HcsGetComputeSystemProperties answers the PropertyTypes it serves
 *    (Statistics, with the job's processor time and memory, and
 *    ProcessList) and refuses any other with
 *    ERROR_NOT_SUPPORTED, which hcsshim internal/hcs/system.go
 *    PropertiesV2 passes on as the query's failure;
 *  - HcsCreateProcess takes CommandLine, or CommandArgs when it has none
 *    (ProcessParameters); HCS_PROCESS_INFORMATION carries the stdio pipes
 *    asked for (CreateStdInPipe...), and HcsGetProcessInfo hands back the
 *    ones the service still holds (a stdin closed by HcsModifyProcess is
 *    not: hcsshim internal/hcs/process.go StdioLegacy, CloseStdin);
 *  - HcsSignalProcess takes the SignalProcessOptions signals (CtrlC,
 *    CtrlBreak, CtrlClose, CtrlLogOff, CtrlShutdown) and refuses others
 *    with HCS_E_INVALID_JSON; signal and terminate of an exited process
 *    fail with HCS_E_PROCESS_ALREADY_STOPPED (hcsshim internal/hcs/errors.go
 *    ErrProcessAlreadyStopped, which its Kill and Signal expect);
 *  - HcsShutDownComputeSystem sends CTRL_SHUTDOWN_EVENT to every process
 *    in the system, as a Windows shutdown reaches every console process
 *    (HandlerRoutine reference page), and completes when they have exited
 *    (10 s at most; HCS_E_OPERATION_TIMEOUT after);
 *  - HcsModifyProcess takes ProcessModifyRequest's CloseHandle of StdIn
 *    and ConsoleSize, and refuses other operations;
 *  - HcsModifyComputeSystem of a stopped system fails with
 *    HCS_E_SYSTEM_ALREADY_STOPPED; any other is accepted, kept as
 *    <id>-modify-<n>.json, and not applied.
 *
 * It leaves unproven what only HCS does: whether HCS accepts the
 * documents, the silo (its own C:, registry, users, network compartment,
 * isolation from the host), users (a process runs as Wine's user),
 * read-only mapped directories (not enforced) and mapped pipes, console
 * emulation (EmulateConsole is ignored, so ConsoleSize is accepted and
 * changes nothing), resource limits (recorded, not applied), and HCS's own
 * errors and timing: the errors a test asks for (faults.h) come in HCS's
 * form, from the call or its operation, but their causes are not
 * simulated. Which HRESULT HCS gives a refused property type or signal is
 * the stand-in's choice, not documented.
 */
#include "hcsservice.h"
#include "faults.h"
#include <psapi.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

static sys_t *systems;

const WCHAR *state_name(int state)
{
    return state == STATE_CREATED ? L"Created" : state == STATE_RUNNING ? L"Running" : L"Stopped";
}

void system_hold(sys_t *s) { s->refs++; }

/* system_release drops a reference; the last frees the system, its job,
 * its processes' handles and the stdio still held. Under lock. */
void system_release(sys_t *s)
{
    sys_t **q;
    if (--s->refs > 0)
        return;
    for (q = &systems; *q; q = &(*q)->next)
        if (*q == s) {
            *q = s->next;
            break;
        }
    while (s->processes) {
        process_t *p = s->processes;
        s->processes = p->next;
        for (int i = 0; i < 3; i++)
            if (p->std[i])
                CloseHandle(p->std[i]);
        CloseHandle(p->pi.hProcess);
        CloseHandle(p->pi.hThread);
        free(p);
    }
    CloseHandle(s->job);
    free(s);
}

BOOL system_terminate_on_close(const sys_t *s) { return s->terminate_on_close && s->state != STATE_STOPPED; }

/* system_find finds a system by id: one not stopped, or stopped with a
 * handle still open. */
sys_t *system_find(const WCHAR *id)
{
    sys_t *s;
    for (s = systems; s; s = s->next)
        if (!wcscmp(s->id, id) && (s->state != STATE_STOPPED || system_handles(s) > 0))
            return s;
    return NULL;
}

BOOL systems_any(void) { return systems != NULL; }

/* make_parents makes the directories of path below the volume's
 * directory that are missing. HCS maps a file or directory at a container
 * path whose directories the image lacks: runhcs passes a mount's
 * destination unchanged (hcsshim internal/hcsoci hcsdoc_wcow.go
 * createMountsConfig, which also maps single files: "HCS has a bug where
 * it does not correctly resolve file (not dir) paths"), and the kubelet
 * mounts every container's termination log at C:\dev\termination-log
 * (k8s.io/kubernetes pkg/kubelet/kuberuntime makeMounts), a directory no
 * Windows base image has; containerd's Windows CI (windows-periodic.yml)
 * runs critest's volume specs, whose ContainerPath is a host temporary
 * folder no image holds. */
static void make_parents(const WCHAR *volume, WCHAR *path)
{
    for (WCHAR *p = path + wcslen(volume) + 1; (p = wcschr(p, L'\\')); p++) {
        *p = 0;
        CreateDirectoryW(path, NULL);
        *p = L'\\';
    }
}

/* map_directories makes each of the document's MappedDirectories, a
 * directory or a file, a Linux symbolic link at its container path in the
 * volume, which Wine follows; the links go when the system exits (a link
 * left in a scratch would lead a removal into the host's directory). */
static void map_directories(sys_t *s, const WCHAR *config)
{
    const WCHAR *p = wcsstr(config, L"\"MappedDirectories\":[");
    const WCHAR *end = p ? wcschr(p, L']') : NULL;
    const WCHAR *h = p, *c = p;
    WCHAR host[MAX_PATH], where[MAX_PATH], link[MAX_PATH];
    /* The n-th HostPath with the n-th ContainerPath: each entry has one of
     * each, in either order (a JSON object's members are unordered, RFC
     * 8259 section 4). */
    while (end && s->nlinks < 32 && (h = wcsstr(h, L"\"HostPath\":\"")) && h < end &&
           (c = wcsstr(c, L"\"ContainerPath\":\"")) && c < end) {
        char *uh, *ul;
        json_read(h + wcslen(L"\"HostPath\":"), host, MAX_PATH);
        json_read(c + wcslen(L"\"ContainerPath\":"), where, MAX_PATH);
        container_path(s->volume, where, link, MAX_PATH);
        if (wcslen(link) > wcslen(s->volume))
            make_parents(s->volume, link);
        uh = standin_unix(host);
        ul = standin_unix(link);
        if (uh && ul && standin_linux2(LINUX_SYMLINK, uh, ul) == 0)
            s->links[s->nlinks++] = ul;
        else
            HeapFree(GetProcessHeap(), 0, ul);
        HeapFree(GetProcessHeap(), 0, uh);
        h++;
        c++;
    }
}

/* volume_of reads the document's Storage.Path, the one "Path" that names
 * a volume, as the directory the layer stand-in made for it. */
static void volume_of(const WCHAR *config, WCHAR *out)
{
    WCHAR volume[MAX_PATH], state[MAX_PATH];
    out[0] = 0;
    for (const WCHAR *p = config; (p = wcsstr(p, L"\"Path\":\"")); p++) {
        json_read(p + wcslen(L"\"Path\":"), volume, MAX_PATH);
        if (!wcsncmp(volume, L"\\\\?\\Volume{", 11)) {
            standin_state_file(L"volumes", volume, state, MAX_PATH);
            standin_read(state, out, MAX_PATH);
            return;
        }
    }
}

/* system_create makes a system, held once for the caller, or completes op
 * with why not (then no system exists). */
HRESULT system_create(const WCHAR *id, const WCHAR *config, sop_t *op, sys_t **out)
{
    sys_t *s;
    HRESULT hr;
    *out = NULL;
    if (faulted("HcsCreateComputeSystem", op, &hr))
        return hr;
    keep_document(id, config);
    if (system_find(id)) {
        op_complete(op, HCS_E_SYSTEM_ALREADY_EXISTS, L"{\"Error\":-2143354609,\"ErrorMessage\":\"A compute system with this id exists\"}", NULL);
        return S_OK;
    }
    s = calloc(1, sizeof(sys_t));
    wcsncpy(s->id, id, 255);
    json_string(config, L"Owner", s->owner, 64);
    json_string(config, L"HostName", s->hostname, 64);
    s->terminate_on_close = json_true(config, L"ShouldTerminateOnLastHandleClosed");
    volume_of(config, s->volume);
    if (!s->volume[0]) {
        free(s);
        op_complete(op, HRESULT_FROM_WIN32(ERROR_PATH_NOT_FOUND), L"{\"ErrorMessage\":\"the document's Storage.Path is not a prepared volume\"}", NULL);
        return S_OK;
    }
    s->job = CreateJobObjectW(NULL, NULL);
    s->refs = 2; /* the list's, the caller's */
    s->next = systems;
    systems = s;
    map_directories(s, config);
    *out = s;
    op_complete(op, S_OK, NULL, NULL);
    return S_OK;
}

static BOOL system_faulted(const char *function, sys_t *s, sop_t *op, HRESULT *ret);

HRESULT system_start(sys_t *s, sop_t *op)
{
    HRESULT hr;
    if (system_faulted("HcsStartComputeSystem", s, op, &hr))
        return hr;
    if (s->state != STATE_CREATED) {
        op_complete(op, s->state == STATE_STOPPED ? HCS_E_SYSTEM_ALREADY_STOPPED : HCS_E_INVALID_STATE, NULL, NULL);
        return S_OK;
    }
    GetSystemTimeAsFileTime(&s->started);
    s->state = STATE_RUNNING;
    op_complete(op, S_OK, NULL, NULL);
    return S_OK;
}

/* stopped_with records the system's exit once, notifies it with data
 * unless data is NULL, and drops the list's reference. Under lock. */
static void stopped_with(sys_t *s, const WCHAR *data)
{
    int i;
    if (s->state == STATE_STOPPED)
        return;
    s->state = STATE_STOPPED;
    for (i = 0; i < s->nlinks; i++) {
        standin_linux2(LINUX_UNLINK, s->links[i], NULL);
        HeapFree(GetProcessHeap(), 0, s->links[i]);
    }
    s->nlinks = 0;
    if (data)
        send_event(s, NULL, EVENT_SYSTEM_EXITED, data);
    system_release(s);
}

static void stopped(sys_t *s) { stopped_with(s, L"{\"Status\":0,\"ExitType\":\"GracefulExit\"}"); }

/* system_faulted applies the test's fault of a system's function
 * (faults.h): exit and gone stop the system, the others are
 * fault_apply's. Under lock. */
static BOOL system_faulted(const char *function, sys_t *s, sop_t *op, HRESULT *ret)
{
    HRESULT hr = S_OK;
    WCHAR doc[160];
    int kind = standin_fault(function, FAULTS_OF_SYSTEM, &hr);
    *ret = S_OK;
    switch (kind) {
    case FAULT_EXIT:
        /* The operation fails with the exit's status, which the exit
         * notification carries too. */
        swprintf(doc, 160, L"{\"Error\":%ld,\"ErrorMessage\":\"The compute system exited unexpectedly.\"}", (long)hr);
        op_complete(op, hr, doc, NULL);
        TerminateJobObject(s->job, 1);
        swprintf(doc, 160, L"{\"Status\":%ld,\"ExitType\":\"UnexpectedExit\"}", (long)hr);
        stopped_with(s, doc);
        return TRUE;
    case FAULT_GONE:
        TerminateJobObject(s->job, 1);
        stopped_with(s, NULL);
        *ret = hr;
        return TRUE;
    }
    return fault_apply(kind, hr, function, op, ret);
}

DWORD active_processes(sys_t *s)
{
    JOBOBJECT_BASIC_ACCOUNTING_INFORMATION a = {0};
    QueryInformationJobObject(s->job, JobObjectBasicAccountingInformation, &a, sizeof(a), NULL);
    return a.ActiveProcesses;
}

void ctrl_event(HANDLE process, DWORD event)
{
    void *ctrl = (void *)GetProcAddress(GetModuleHandleW(L"kernel32.dll"), "CtrlRoutine");
    HANDLE t;
    if (!ctrl)
        return;
    t = CreateRemoteThread(process, NULL, 0, (LPTHREAD_START_ROUTINE)ctrl, (void *)(ULONG_PTR)event, 0, NULL);
    if (t)
        CloseHandle(t);
}

typedef struct {
    sys_t *s;
    sop_t *op;
} stop_t;

/* shutdown_later waits up to 10 s for the processes, which got
 * CTRL_SHUTDOWN_EVENT, to exit: HCS's shutdown completes when the
 * container has stopped, and times out otherwise. */
static DWORD WINAPI shutdown_later(void *arg)
{
    stop_t *st = arg;
    int i;
    for (i = 0; i < 100 && active_processes(st->s) > 0; i++)
        Sleep(100);
    EnterCriticalSection(&lock);
    if (active_processes(st->s) > 0) {
        op_complete(st->op, HCS_E_OPERATION_TIMEOUT, NULL, NULL);
    } else {
        op_complete(st->op, S_OK, NULL, NULL);
        stopped(st->s);
    }
    system_release(st->s);
    LeaveCriticalSection(&lock);
    free(st);
    return 0;
}

/* shutdown_event sends CTRL_SHUTDOWN_EVENT to every process of the system,
 * the ones its processes started included: a container's shutdown is its
 * Windows' shutdown, and the system sends that event to the console
 * processes when it shuts down (HandlerRoutine reference page), not only to
 * the processes HcsCreateProcess started. */
static void shutdown_event(sys_t *s)
{
    union {
        JOBOBJECT_BASIC_PROCESS_ID_LIST list;
        BYTE bytes[sizeof(JOBOBJECT_BASIC_PROCESS_ID_LIST) + 255 * sizeof(ULONG_PTR)];
    } ids = {0};
    /* The list runs past ProcessIdList[1]: index it through a pointer the
     * compiler knows no bound of. */
    const ULONG_PTR *pids = (const ULONG_PTR *)(ids.bytes + offsetof(JOBOBJECT_BASIC_PROCESS_ID_LIST, ProcessIdList));
    DWORD i;
    if (!QueryInformationJobObject(s->job, JobObjectBasicProcessIdList, &ids, sizeof(ids), NULL))
        return;
    for (i = 0; i < ids.list.NumberOfProcessIdsInList; i++) {
        HANDLE h = OpenProcess(PROCESS_ALL_ACCESS, FALSE, (DWORD)pids[i]);
        if (h) {
            ctrl_event(h, CTRL_SHUTDOWN_EVENT);
            CloseHandle(h);
        }
    }
}

HRESULT system_shutdown(sys_t *s, sop_t *op)
{
    stop_t *st;
    HRESULT hr;
    if (system_faulted("HcsShutDownComputeSystem", s, op, &hr))
        return hr;
    if (s->state == STATE_STOPPED)
        return HCS_E_SYSTEM_ALREADY_STOPPED;
    shutdown_event(s);
    st = calloc(1, sizeof(stop_t));
    st->s = s;
    st->op = op;
    system_hold(s);
    CloseHandle(CreateThread(NULL, 0, shutdown_later, st, 0, NULL));
    return S_OK;
}

void system_terminate_now(sys_t *s)
{
    TerminateJobObject(s->job, 1);
    stopped(s);
}

HRESULT system_terminate(sys_t *s, sop_t *op)
{
    HRESULT hr;
    if (system_faulted("HcsTerminateComputeSystem", s, op, &hr))
        return hr;
    if (s->state == STATE_STOPPED)
        return HCS_E_SYSTEM_ALREADY_STOPPED;
    system_hold(s);
    system_terminate_now(s);
    op_complete(op, S_OK, NULL, NULL);
    system_release(s);
    return S_OK;
}

/* system_modify accepts a modification of a system not stopped and
 * applies none (the stand-in has no devices, mounts or credential guard,
 * and records limits without applying them); it keeps each accepted
 * request as the system's documents, <id>-modify-<n>.json, n from 1, so
 * that a test can read what HCS was asked. */
HRESULT system_modify(sys_t *s, sop_t *op, const WCHAR *doc)
{
    WCHAR name[300];
    if (s->state == STATE_STOPPED) {
        op_complete(op, HCS_E_SYSTEM_ALREADY_STOPPED, NULL, NULL);
        return S_OK;
    }
    swprintf(name, 300, L"%ls-modify-%d", s->id, ++s->nmodify);
    keep_document(name, doc ? doc : L"");
    op_complete(op, S_OK, NULL, NULL);
    return S_OK;
}

static void iso_time(const FILETIME *ft, WCHAR *out)
{
    SYSTEMTIME st;
    FileTimeToSystemTime(ft, &st);
    swprintf(out, 64, L"%04u-%02u-%02uT%02u:%02u:%02u.%03uZ", st.wYear, st.wMonth, st.wDay, st.wHour, st.wMinute, st.wSecond, st.wMilliseconds);
}

/* process_list is the job's processes as HCS's ProcessList. */
static void process_list(sys_t *s, WCHAR *out, size_t n)
{
    struct {
        JOBOBJECT_BASIC_PROCESS_ID_LIST l;
        ULONG_PTR more[255];
    } ids = {0};
    size_t i = 0;
    DWORD k;
    QueryInformationJobObject(s->job, JobObjectBasicProcessIdList, &ids, sizeof(ids), NULL);
    i += swprintf(out + i, n - i, L"[");
    for (k = 0; k < ids.l.NumberOfProcessIdsInList && i + 600 < n; k++) {
        WCHAR image[MAX_PATH] = L"", *base;
        DWORD len = MAX_PATH;
        HANDLE p = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, (DWORD)ids.l.ProcessIdList[k]);
        if (p) {
            QueryFullProcessImageNameW(p, 0, image, &len);
            CloseHandle(p);
        }
        base = wcsrchr(image, L'\\');
        i += swprintf(out + i, n - i, L"%ls{\"ProcessId\":%lu,\"ImageName\":\"%ls\"}", k ? L"," : L"",
                      (DWORD)ids.l.ProcessIdList[k], base ? base + 1 : image);
    }
    swprintf(out + i, n - i, L"]");
}

/* job_memory is the memory of the job's processes, as the container's
 * Statistics.Memory (HCS JSON schema MemoryStats; hcsshim
 * internal/jobcontainers PropertiesV2 reads a job object's memory as its
 * container's): the commit is the processes' private bytes, the peak the
 * most seen by any query, the private working set their working sets.
 * Wine counts no commit charge (PrivateUsage is 0) and no private part of
 * a working set, so under Wine both stand on the working set (Linux's
 * resident set): the numbers move with the processes, but their split is
 * unproven. */
static void job_memory(sys_t *s, ULONGLONG *commit, ULONGLONG *ws)
{
    struct {
        JOBOBJECT_BASIC_PROCESS_ID_LIST l;
        ULONG_PTR more[255];
    } ids = {0};
    DWORD k;
    *commit = *ws = 0;
    QueryInformationJobObject(s->job, JobObjectBasicProcessIdList, &ids, sizeof(ids), NULL);
    for (k = 0; k < ids.l.NumberOfProcessIdsInList; k++) {
        PROCESS_MEMORY_COUNTERS_EX m = {sizeof(m)};
        HANDLE p = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, (DWORD)ids.l.ProcessIdList[k]);
        if (!p)
            continue;
        if (K32GetProcessMemoryInfo(p, (PROCESS_MEMORY_COUNTERS *)&m, sizeof(m))) {
            *commit += m.PrivateUsage ? m.PrivateUsage : m.WorkingSetSize;
            *ws += m.WorkingSetSize;
        }
        CloseHandle(p);
    }
    if (*commit > s->peak_commit)
        s->peak_commit = *commit;
}

/* property_types checks the query's PropertyTypes: FALSE names one the
 * stand-in does not serve. */
static BOOL property_types(const WCHAR *query, BOOL *list)
{
    const WCHAR *p = query ? wcsstr(query, L"\"PropertyTypes\":[") : NULL;
    WCHAR type[64];
    *list = FALSE;
    if (!p)
        return TRUE;
    for (p += wcslen(L"\"PropertyTypes\":["); *p == L'"';) {
        p = json_read(p, type, 64);
        if (!wcscmp(type, L"ProcessList"))
            *list = TRUE;
        else if (wcscmp(type, L"Statistics"))
            return FALSE;
        if (*p == L',')
            p++;
    }
    return TRUE;
}

HRESULT system_properties(sys_t *s, sop_t *op, const WCHAR *query)
{
    WCHAR *doc, now_s[64], start_s[64], *list;
    JOBOBJECT_BASIC_ACCOUNTING_INFORMATION a = {0};
    FILETIME now;
    ULONGLONG up, commit, ws;
    BOOL with_list;
    if (!property_types(query, &with_list)) {
        op_complete(op, HRESULT_FROM_WIN32(ERROR_NOT_SUPPORTED), L"{\"ErrorMessage\":\"the stand-in serves the property types Statistics and ProcessList only\"}", NULL);
        return S_OK;
    }
    doc = malloc(65536 * sizeof(WCHAR));
    list = malloc(60000 * sizeof(WCHAR));
    GetSystemTimeAsFileTime(&now);
    iso_time(&now, now_s);
    iso_time(&s->started, start_s);
    up = (((ULONGLONG)now.dwHighDateTime << 32) | now.dwLowDateTime) - (((ULONGLONG)s->started.dwHighDateTime << 32) | s->started.dwLowDateTime);
    QueryInformationJobObject(s->job, JobObjectBasicAccountingInformation, &a, sizeof(a), NULL);
    job_memory(s, &commit, &ws);
    list[0] = 0;
    if (with_list)
        process_list(s, list, 60000);
    swprintf(doc, 65536,
             L"{\"Id\":\"%ls\",\"State\":\"%ls\",\"Stopped\":%ls,\"Statistics\":{\"Timestamp\":\"%ls\",\"ContainerStartTime\":\"%ls\",\"Uptime100ns\":%llu,"
             L"\"Processor\":{\"TotalRuntime100ns\":%llu,\"RuntimeUser100ns\":%llu,\"RuntimeKernel100ns\":%llu},"
             L"\"Memory\":{\"MemoryUsageCommitBytes\":%llu,\"MemoryUsageCommitPeakBytes\":%llu,\"MemoryUsagePrivateWorkingSetBytes\":%llu}}%ls%ls}",
             s->id, state_name(s->state), s->state == STATE_STOPPED ? L"true" : L"false", now_s, start_s, up,
             a.TotalUserTime.QuadPart + a.TotalKernelTime.QuadPart, a.TotalUserTime.QuadPart, a.TotalKernelTime.QuadPart,
             commit, s->peak_commit, ws, list[0] ? L",\"ProcessList\":" : L"", list);
    op_complete(op, S_OK, doc, NULL);
    free(doc);
    free(list);
    return S_OK;
}

/* systems_enumerate lists the node's systems with their states, of the
 * owners the query names, if it names any. */
void systems_enumerate(const WCHAR *query, sop_t *op)
{
    size_t n = 2, used;
    WCHAR *doc, owner[80];
    sys_t *s;
    for (s = systems; s; s = s->next)
        n += 400 + wcslen(s->id);
    doc = calloc(n, sizeof(WCHAR));
    wcscpy(doc, L"[");
    for (s = systems; s; s = s->next) {
        if (!system_find(s->id) || system_find(s->id) != s)
            continue;
        swprintf(owner, 80, L"\"%ls\"", s->owner);
        if (query && wcsstr(query, L"\"Owners\"") && !wcsstr(query, owner))
            continue;
        used = wcslen(doc);
        swprintf(doc + used, n - used, L"%ls{\"Id\":\"%ls\",\"Owner\":\"%ls\",\"State\":\"%ls\",\"SystemType\":\"Container\",\"RuntimeOsType\":\"Windows\"}",
                 used > 1 ? L"," : L"", s->id, s->owner, state_name(s->state));
    }
    wcscat(doc, L"]");
    op_complete(op, S_OK, doc, NULL);
    free(doc);
}

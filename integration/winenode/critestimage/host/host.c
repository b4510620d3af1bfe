/*
 * host.c is the conformance image's powershell.exe: a native host that runs
 * the image's script engine (powershell-engine.exe, the Go program of
 * ../powershell, beside it) with the same arguments and standard streams,
 * and exits with its status. Windows' powershell.exe is a native program
 * too (it hosts the .NET engine).
 *
 * Why not the Go engine alone: a container stop right after a start sends
 * the container's first process CTRL_SHUTDOWN_EVENT (HcsSignalProcess) in
 * its first milliseconds, and under Wine 8 a Go program that gets a console
 * control event while its runtime starts hangs or crashes (docs/
 * conformance.md), where Windows ends the process with its default
 * handler. A native program does not have that window: this one is ended
 * by the default handler whenever the event comes. It ends the engine and
 * what the engine started with it (a job object of their own), as the
 * console's event ends all of its processes on Windows; the HCS stand-in
 * delivers the event to the one process HcsSignalProcess names.
 */
#include <windows.h>
#include <stdio.h>
#include <wchar.h>

static CRITICAL_SECTION lock;
static HANDLE job;
static BOOL ended;

/* on_event ends the engine's processes and lets the default handler end
 * this one. */
static BOOL WINAPI on_event(DWORD event)
{
    EnterCriticalSection(&lock);
    ended = TRUE;
    if (job)
        TerminateJobObject(job, STATUS_CONTROL_C_EXIT);
    LeaveCriticalSection(&lock);
    return FALSE;
}

/* arguments is the command line after the program's name, parsed as
 * CommandLineToArgvW parses argument 0: to the closing quote when it
 * starts with one, else to the first blank. */
static const WCHAR *arguments(const WCHAR *line)
{
    if (*line == L'"') {
        line++;
        while (*line && *line != L'"')
            line++;
        if (*line)
            line++;
    } else {
        while (*line && *line != L' ' && *line != L'\t')
            line++;
    }
    return line;
}

/* start starts the engine in a job that ends with this process. */
static BOOL start(const WCHAR *path, WCHAR *line, STARTUPINFOW *si, PROCESS_INFORMATION *pi)
{
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION limits = {0};
    limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    job = CreateJobObjectW(NULL, NULL);
    if (!job || !SetInformationJobObject(job, JobObjectExtendedLimitInformation, &limits, sizeof(limits)))
        return FALSE;
    if (!CreateProcessW(path, line, NULL, NULL, TRUE, CREATE_SUSPENDED, NULL, NULL, si, pi))
        return FALSE;
    if (!AssignProcessToJobObject(job, pi->hProcess)) {
        DWORD err = GetLastError();
        TerminateProcess(pi->hProcess, 1);
        CloseHandle(pi->hProcess);
        CloseHandle(pi->hThread);
        SetLastError(err);
        return FALSE;
    }
    ResumeThread(pi->hThread);
    CloseHandle(pi->hThread);
    return TRUE;
}

int wmain(void)
{
    static WCHAR exe[MAX_PATH], path[MAX_PATH], line[32768];
    STARTUPINFOW si = {sizeof(si)};
    PROCESS_INFORMATION pi;
    HANDLE engine;
    WCHAR *dot;
    DWORD code = 1;
    BOOL ok = FALSE;

    InitializeCriticalSection(&lock);
    SetConsoleCtrlHandler(on_event, TRUE);
    if (!GetModuleFileNameW(NULL, exe, MAX_PATH)) {
        fwprintf(stderr, L"host: the program's own path: error %lu\r\n", GetLastError());
        return 1;
    }
    /* C:\dir\powershell.exe runs C:\dir\powershell-engine.exe. */
    dot = wcsrchr(exe, L'.');
    if (dot && !_wcsicmp(dot, L".exe"))
        *dot = 0;
    swprintf(path, MAX_PATH, L"%ls-engine.exe", exe);
    swprintf(line, 32768, L"\"%ls\"%ls", path, arguments(GetCommandLineW()));
    si.dwFlags = STARTF_USESTDHANDLES;
    si.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
    si.hStdOutput = GetStdHandle(STD_OUTPUT_HANDLE);
    si.hStdError = GetStdHandle(STD_ERROR_HANDLE);
    EnterCriticalSection(&lock);
    if (!ended)
        ok = start(path, line, &si, &pi);
    LeaveCriticalSection(&lock);
    if (!ok && ended)
        return (int)STATUS_CONTROL_C_EXIT; /* the event came first: the default handler is ending this process */
    if (!ok) {
        fwprintf(stderr, L"host: start %ls: error %lu\r\n", path, GetLastError());
        return 1;
    }
    engine = pi.hProcess;
    WaitForSingleObject(engine, INFINITE);
    GetExitCodeProcess(engine, &code);
    return (int)code;
}

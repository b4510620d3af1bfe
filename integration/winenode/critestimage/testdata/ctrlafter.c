/*
 * ctrlafter.exe LINE DELAY_MS...: for each delay, starts LINE, sends it
 * CTRL_SHUTDOWN_EVENT that many milliseconds after CreateProcess returned,
 * as the HCS stand-in delivers HcsSignalProcess (a thread at
 * kernel32!CtrlRoutine in the process), and waits up to 10 s for its exit.
 * Each runs in a job of its own, as a container's processes run in the
 * stand-in's, and the processes it started must be gone 2 s after it.
 * Prints "DELAY exit CODE left N" or "DELAY hung" a line; what is left is
 * terminated. The exit status is the number that hung or left processes.
 */
#include <windows.h>
#include <stdio.h>
#include <stdlib.h>

int wmain(int argc, WCHAR **argv)
{
    void *ctrl = (void *)GetProcAddress(GetModuleHandleW(L"kernel32.dll"), "CtrlRoutine");
    int bad = 0;
    if (argc < 3 || !ctrl) {
        fwprintf(stderr, L"usage: ctrlafter LINE DELAY_MS...\n");
        return 100;
    }
    for (int i = 2; i < argc; i++) {
        static WCHAR line[32768];
        STARTUPINFOW si = {sizeof(si)};
        PROCESS_INFORMATION pi;
        DWORD delay = wcstoul(argv[i], NULL, 10), code;
        HANDLE t, job = CreateJobObjectW(NULL, NULL);
        JOBOBJECT_BASIC_ACCOUNTING_INFORMATION a = {0};
        wcsncpy(line, argv[1], 32767);
        if (!job || !CreateProcessW(NULL, line, NULL, NULL, TRUE, CREATE_SUSPENDED, NULL, NULL, &si, &pi)) {
            fwprintf(stderr, L"start %ls: error %lu\n", argv[1], GetLastError());
            return 100;
        }
        AssignProcessToJobObject(job, pi.hProcess);
        ResumeThread(pi.hThread);
        if (delay)
            Sleep(delay);
        t = CreateRemoteThread(pi.hProcess, NULL, 0, (LPTHREAD_START_ROUTINE)ctrl, (void *)(ULONG_PTR)CTRL_SHUTDOWN_EVENT, 0, NULL);
        if (t)
            CloseHandle(t);
        if (WaitForSingleObject(pi.hProcess, 10000) != WAIT_OBJECT_0) {
            TerminateProcess(pi.hProcess, 1);
            wprintf(L"%lu hung\n", delay);
            bad++;
        } else {
            GetExitCodeProcess(pi.hProcess, &code);
            for (int k = 0; k < 20; k++) {
                QueryInformationJobObject(job, JobObjectBasicAccountingInformation, &a, sizeof(a), NULL);
                if (!a.ActiveProcesses)
                    break;
                Sleep(100);
            }
            wprintf(L"%lu exit 0x%lx left %lu\n", delay, code, a.ActiveProcesses);
            if (a.ActiveProcesses)
                bad++;
        }
        fflush(stdout);
        TerminateJobObject(job, 1);
        CloseHandle(job);
        CloseHandle(pi.hProcess);
        CloseHandle(pi.hThread);
    }
    return bad;
}

/*
 * bcryptprimitives.dll for Wine 8.
 *
 * The Go runtime (1.22 and newer) seeds its random source from
 * bcryptprimitives!ProcessPrng, which Wine 8 does not provide, so every Go
 * program aborts at start-up under it. This DLL supplies that one export on
 * top of advapi32!SystemFunction036 (RtlGenRandom), which Wine has.
 * It is copied into the template prefix's windows/system32, the only place
 * the Go runtime loads it from.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
	while (length > 0) {
		ULONG chunk = length > 0x7fffffff ? 0x7fffffff : (ULONG)length;
		if (!SystemFunction036(data, chunk))
			return FALSE;
		data += chunk;
		length -= chunk;
	}
	return TRUE;
}

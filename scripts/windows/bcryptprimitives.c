/* bcryptprimitives.dll for Wine 8, which lacks it: Rust's standard library (so the pydantic-core, rpds-py and
   cryptography wheels) asks it for random bytes through ProcessPrng. Windows has the real DLL; this one exists
   only in the Windows check's own Python folder. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length); /* RtlGenRandom, advapi32 */

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG chunk = length > 0x40000000 ? 0x40000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}

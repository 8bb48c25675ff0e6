/* A stand-in for libnvidia-ml.so.1, built by the tests with the machine's C compiler so
 * koord's real dlopen path runs without a GPU. It reports FAKE_NVML_GPUS GPUs (the
 * environment variable, else the compile-time -DFAKE_NVML_DEFAULT_GPUS=N, else 2; at most
 * 8); FAKE_NVML_MODEL sets the product name (default "NVIDIA A100-SXM4-80GB"). Only the
 * entry points koord calls exist, with NVML's ABI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_INSUFFICIENT_SIZE 7

typedef struct { int index; } fake_device;
typedef fake_device *nvmlDevice_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

static fake_device devices[8];
static int initialized = 0;

#ifndef FAKE_NVML_DEFAULT_GPUS
#define FAKE_NVML_DEFAULT_GPUS 2
#endif

static unsigned int count(void) {
    const char *v = getenv("FAKE_NVML_GPUS");
    int n = v ? atoi(v) : FAKE_NVML_DEFAULT_GPUS;
    if (n < 0) n = 0;
    if (n > 8) n = 8;
    return (unsigned int)n;
}

static nvmlReturn_t copy(char *dst, unsigned int len, const char *src) {
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(dst, src);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) {
    for (int i = 0; i < 8; i++) devices[i].index = i;
    initialized = 1;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) {
    initialized = 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (!n) return NVML_ERROR_INVALID_ARGUMENT;
    *n = count();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (!d || i >= count()) return NVML_ERROR_INVALID_ARGUMENT;
    *d = &devices[i];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int len) {
    char buf[64];
    if (!d) return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(buf, sizeof buf, "GPU-00000000-0000-0000-0000-00000000000%d", d->index);
    return copy(uuid, len, buf);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len) {
    const char *m = getenv("FAKE_NVML_MODEL");
    if (!d) return NVML_ERROR_INVALID_ARGUMENT;
    return copy(name, len, m ? m : "NVIDIA A100-SXM4-80GB");
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int *minor) {
    if (!d || !minor) return NVML_ERROR_INVALID_ARGUMENT;
    *minor = (unsigned int)d->index;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    if (!d || !m) return NVML_ERROR_INVALID_ARGUMENT;
    m->total = 85899345920ULL; /* 80 GiB */
    m->used = 1073741824ULL * (unsigned long long)(d->index + 1);
    m->free = m->total - m->used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
    if (!d || !u) return NVML_ERROR_INVALID_ARGUMENT;
    u->gpu = 10u * (unsigned int)d->index;
    u->memory = 5u * (unsigned int)d->index;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p) {
    if (!d || !p) return NVML_ERROR_INVALID_ARGUMENT;
    memset(p, 0, sizeof *p);
    p->domain = 0;
    p->bus = 0x10u + (unsigned int)d->index;
    snprintf(p->busId, sizeof p->busId, "00000000:%02X:00.0", p->bus);
    snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "0000:%02X:00.0", p->bus);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int len) {
    return copy(v, len, "535.104.05");
}

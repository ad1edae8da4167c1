// Clang thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html).
// A clang build checks them with -Wthread-safety (the top-level CMakeLists turns it on for
// kolo's own targets); other compilers see nothing. Prefixed KOLO_ because gRPC's headers
// bring in Abseil's unprefixed GUARDED_BY and friends.
#pragma once

#if defined(__clang__)
#define KOLO_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define KOLO_THREAD_ANNOTATION_(x)
#endif

// On a type: objects of it are a capability (a lock) named `x` in diagnostics.
#define KOLO_CAPABILITY(x) KOLO_THREAD_ANNOTATION_(capability(x))
// On an RAII type that acquires a capability in its constructor and releases it when destroyed.
#define KOLO_SCOPED_CAPABILITY KOLO_THREAD_ANNOTATION_(scoped_lockable)
// On a data member: read and written only while holding `x`.
#define KOLO_GUARDED_BY(x) KOLO_THREAD_ANNOTATION_(guarded_by(x))
// On a pointer member: the pointee is read and written only while holding `x`.
#define KOLO_PT_GUARDED_BY(x) KOLO_THREAD_ANNOTATION_(pt_guarded_by(x))
// On a mutex member: when both are held, this one is taken after / before the ones named.
#define KOLO_ACQUIRED_AFTER(...) KOLO_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))
#define KOLO_ACQUIRED_BEFORE(...) KOLO_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))
// On a function: the caller must hold / must not hold the capabilities named.
#define KOLO_REQUIRES(...) KOLO_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#define KOLO_EXCLUDES(...) KOLO_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
// On a function: it acquires / releases the capabilities named (or `this` when none are).
#define KOLO_ACQUIRE(...) KOLO_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define KOLO_RELEASE(...) KOLO_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
// On a function returning bool: it acquires the capability when it returns the given value.
#define KOLO_TRY_ACQUIRE(...) KOLO_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))

// On a function: asserts at run time that the capability is held; the analysis believes it.
#define KOLO_ASSERT_CAPABILITY(x) KOLO_THREAD_ANNOTATION_(assert_capability(x))
// On a function returning a reference to a capability: the capability it returns.
#define KOLO_RETURN_CAPABILITY(x) KOLO_THREAD_ANNOTATION_(lock_returned(x))
// Turns the analysis off for one function; say at the use why it cannot be expressed.
#define KOLO_NO_THREAD_SAFETY_ANALYSIS KOLO_THREAD_ANNOTATION_(no_thread_safety_analysis)

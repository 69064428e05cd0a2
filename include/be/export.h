/*
 * export.h - BE_EXPORT, the visibility mark of public symbols.
 *
 * The library builds with -fvisibility=hidden and BE_BUILDING_LIBRARY, so
 * only functions marked BE_EXPORT are part of libbe.so's ABI. For users of
 * the headers the mark expands to nothing.
 */
#ifndef BE_EXPORT_H
#define BE_EXPORT_H

#if defined(BE_BUILDING_LIBRARY)
#define BE_EXPORT __attribute__((visibility("default")))
#else
#define BE_EXPORT
#endif

#endif /* BE_EXPORT_H */

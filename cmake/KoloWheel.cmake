# What the pip build puts in the wheel: install component kolo_wheel (pyproject.toml builds the
# target kolo_wheel and installs that component into the wheel's site-packages root):
#   kolo/                          the package: kolo.common always; kolo.torch, kolo.tensorflow
#                                  and kolo.keras with their native modules when built
#   kolo/lib/libkolo.so.<major>    libkolo, one file named by its SONAME (a wheel keeps no
#                                  symlinks); the native modules find it by RUNPATH $ORIGIN/../lib
#   kolo/bin/kolorun, kolo-timeline
#                                  the programs; the venv's bin/kolorun and bin/kolo-timeline are
#                                  pip's scripts for pyproject.toml's [project.scripts], which
#                                  exec these (kolo/_executables.py)
# A plain `cmake --install` installs none of it (EXCLUDE_FROM_ALL); from any built tree,
# `cmake --install <build> --component kolo_wheel --prefix <dir>` lays the wheel's files out
# without building anything (tests/install/pip_install_test.sh makes its wheel that way).
# Included by KoloInstall.cmake, after every target exists.

set(_kolo_wheel_targets kolo_shared kolorun kolo-timeline)
if(KOLO_HAVE_TORCH)
  list(APPEND _kolo_wheel_targets kolo_torch)
endif()
if(KOLO_HAVE_TENSORFLOW)
  list(APPEND _kolo_wheel_targets kolo_tensorflow_ops)
endif()
# What pip builds (pyproject.toml's build.targets): the wheel's targets and nothing else: no
# tests, benchmarks or examples.
add_custom_target(kolo_wheel)
add_dependencies(kolo_wheel ${_kolo_wheel_targets})

set(_kolo_wheel_install COMPONENT ${KOLO_WHEEL_COMPONENT} EXCLUDE_FROM_ALL)
include(${PROJECT_SOURCE_DIR}/python/common_files.cmake)  # KOLO_COMMON_PY_FILES
foreach(file IN LISTS KOLO_COMMON_PY_FILES ITEMS kolo/_executables.py)
  get_filename_component(dir ${file} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/python/${file} DESTINATION ${dir} ${_kolo_wheel_install})
endforeach()

# The programs link kolo's static libraries: they need no libkolo.so.
install(TARGETS kolorun kolo-timeline RUNTIME DESTINATION kolo/bin ${_kolo_wheel_install})

install(TARGETS kolo_shared LIBRARY DESTINATION kolo/lib NAMELINK_SKIP ${_kolo_wheel_install})
# The SONAME's symlink becomes the library itself (stripped by then, under --strip).
install(CODE [[
  set(lib "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/kolo/lib")
  file(RENAME "${lib}/$<TARGET_FILE_NAME:kolo_shared>"
              "${lib}/$<TARGET_SONAME_FILE_NAME:kolo_shared>")
]] ${_kolo_wheel_install})

<?php
// psr/container 1.0's interface, which ouqiang's PHP client implements (Debian ships 2.0, whose
// typed signatures its untyped Container cannot implement).

namespace Psr\Container;

interface ContainerInterface
{
    public function get($id);

    public function has($id);
}

<?php

use Illuminate\Database\Migrations\Migration;
use Illuminate\Database\Schema\Blueprint;
use Illuminate\Support\Facades\Schema;

/*
 * Tables the parity scenarios need (tests/integration/test_laravel_versions.py):
 * job_batches as `php artisan queue:batches-table` makes it (the same columns
 * in 8, 10 and 13), and parity_items for the deleteWhenMissingModels jobs.
 */
return new class extends Migration
{
    public function up()
    {
        Schema::create('job_batches', function (Blueprint $table) {
            $table->string('id')->primary();
            $table->string('name');
            $table->integer('total_jobs');
            $table->integer('pending_jobs');
            $table->integer('failed_jobs');
            $table->longText('failed_job_ids');
            $table->mediumText('options')->nullable();
            $table->integer('cancelled_at')->nullable();
            $table->integer('created_at');
            $table->integer('finished_at')->nullable();
        });

        Schema::create('parity_items', function (Blueprint $table) {
            $table->id();
            $table->string('name');
        });
    }

    public function down()
    {
        Schema::dropIfExists('job_batches');
        Schema::dropIfExists('parity_items');
    }
};
